package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// TestRefusal: every class of address an allowed name could be pointed at
// to reach the host or a private network is refused; public ones pass.
func TestRefusal(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("93.184.215.14")}
	for _, tc := range []struct {
		ip     string
		refuse bool
	}{
		{"127.0.0.1", true}, {"::1", true}, {"169.254.169.254", true}, {"fe80::1", true}, {"0.0.0.0", true},
		{"10.1.2.3", true}, {"172.17.0.1", true}, {"172.31.255.254", true}, {"192.168.1.1", true},
		{"fd00::1", true}, {"100.64.0.1", true}, {"192.0.2.2", true}, {"198.18.0.1", true}, {"240.0.0.1", true},
		{"255.255.255.255", true}, {"224.0.0.1", true}, {"::ffff:10.0.0.1", true}, {"::ffff:127.0.0.1", true},
		{"93.184.215.14", true}, // the host's own public address
		{"8.8.8.8", false}, {"172.32.0.1", false}, {"2606:4700::1111", false}, {"151.101.0.223", false},
	} {
		err := Refusal(netip.MustParseAddr(tc.ip), own)
		if (err != nil) != tc.refuse {
			t.Errorf("Refusal(%s) = %v, want refused %v", tc.ip, err, tc.refuse)
		}
	}
}

// TestNeverReachesTheHostsAddresses: a service listening on all of the
// host's addresses is not reached through the proxy at any of them: not as
// an allowed address, and not through an allowed name that a DNS server
// resolves to one of them (the resolution is the attacker's: checked on
// the address dialled).
func TestNeverReachesTheHostsAddresses(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var reached atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprint(w, "host service")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	own, err := hostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var v4 []netip.Addr
	var hosts []string
	for _, ip := range own {
		if ip.Is4() && !ip.IsLoopback() {
			v4 = append(v4, ip)
		}
		if !ip.IsLinkLocalUnicast() {
			hosts = append(hosts, ip.String())
		}
	}
	if len(v4) == 0 {
		t.Fatal("this host has no IPv4 address but loopback: nothing to test against")
	}
	// A name per host address, answered by a DNS server of the test's own.
	names := map[string]netip.Addr{}
	for i, ip := range v4 {
		name := fmt.Sprintf("h%d.allowed.test", i)
		names[name+"."] = ip
		hosts = append(hosts, name)
	}
	resolver := fakeDNS(t, names)
	p := New(hosts, guardedDial(resolver), nil)
	if err := p.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	c := client(p, nil)
	var urls []string
	for _, h := range hosts {
		urls = append(urls, "http://"+net.JoinHostPort(h, fmt.Sprint(port))+"/")
	}
	for _, u := range urls {
		if code, body := get(t, c, u); code != http.StatusBadGateway || !strings.Contains(body, "address of this host") {
			t.Errorf("%s: %d %q, want 502 naming why", u, code, body)
		}
	}
	// CONNECT the same way.
	for _, h := range hosts {
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", net.JoinHostPort(h, fmt.Sprint(port)))
		buf := make([]byte, 64)
		n, _ := conn.Read(buf)
		conn.Close()
		if !strings.Contains(string(buf[:n]), " 502 ") {
			t.Errorf("CONNECT %s: %q, want 502", h, buf[:n])
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the host's service was reached %d times through the proxy", n)
	}
}

// fakeDNS serves A records for names on a UDP port of loopback and returns
// a resolver that asks it alone.
func fakeDNS(t *testing.T, names map[string]netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var m dnsmessage.Message
			if err := m.Unpack(buf[:n]); err != nil || len(m.Questions) != 1 {
				continue
			}
			q := m.Questions[0]
			m.Header.Response, m.Header.Authoritative = true, true
			m.Answers = nil
			if ip, ok := names[strings.ToLower(q.Name.String())]; ok && q.Type == dnsmessage.TypeA {
				m.Answers = []dnsmessage.Resource{{Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
					Body: &dnsmessage.AResource{A: ip.As4()}}}
			} else if !ok {
				m.Header.RCode = dnsmessage.RCodeNameError
			}
			out, err := m.Pack()
			if err == nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}
