package egress

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	patterns := []string{"pypi.org", "*.example.com", "10.0.0.7"}
	for host, want := range map[string]bool{
		"pypi.org":              true,
		"PyPI.org.":             true,
		"files.pypi.org":        false,
		"evilpypi.org":          false,
		"a.example.com":         true,
		"a.b.example.com":       true,
		"example.com":           false,
		"badexample.com":        false,
		".example.com":          false,
		"10.0.0.7":              true,
		"10.0.0.8":              false,
		"":                      false,
		"pypi.org.evil.net":     false,
		"a.example.com.evil.io": false,
	} {
		if got := Match(patterns, host); got != want {
			t.Errorf("Match(%q) = %v, want %v", host, got, want)
		}
	}
}

// start serves a proxy whose dialer reaches upstream for every allowed
// name, as a resolver would.
func start(t *testing.T, hosts []string, upstream string, dial DialFunc) *Proxy {
	t.Helper()
	if dial == nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, upstream)
		}
	}
	p := New(hosts, dial, nil)
	if err := p.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func client(p *Proxy, tlsConf *tls.Config) *http.Client {
	u, _ := url.Parse("http://" + p.Addr())
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: tlsConf, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAllowsOnlyTheListedHosts: plain HTTP and HTTPS through CONNECT reach
// an allowed host's server; any other host is refused with 403 and
// counted, and nothing reaches the upstream for it.
func TestAllowsOnlyTheListedHosts(t *testing.T) {
	var reached []string
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Host)
		fmt.Fprint(w, "hello from upstream")
	}))
	defer up.Close()
	plain := httptest.NewServer(up.Config.Handler)
	defer plain.Close()

	tlsConf := up.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsConf.ServerName = "example.com" // httptest's certificate
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())

	p := start(t, []string{"allowed.test", "*.mirror.test"}, up.Listener.Addr().String(), nil)
	c := client(p, tlsConf)
	if code, body := get(t, c, "https://allowed.test:"+port+"/x"); code != 200 || body != "hello from upstream" {
		t.Errorf("https to an allowed host: %d %q", code, body)
	}
	if code, body := get(t, c, "https://deb.mirror.test:"+port+"/"); code != 200 || body != "hello from upstream" {
		t.Errorf("https to a host under an allowed wildcard: %d %q", code, body)
	}
	if code, body := get(t, c, "https://other.test:"+port+"/"); code != 0 || !strings.Contains(body, "Forbidden") {
		t.Errorf("https to another host: %d %q, want the CONNECT refused", code, body)
	}

	pp := start(t, []string{"allowed.test"}, plain.Listener.Addr().String(), nil)
	pc := client(pp, nil)
	if code, body := get(t, pc, "http://allowed.test/y"); code != 200 || body != "hello from upstream" {
		t.Errorf("http to an allowed host: %d %q", code, body)
	}
	for range 2 {
		if code, body := get(t, pc, "http://mirror.test/y"); code != 403 || !strings.Contains(body, "mirror.test is not among the task's allowed_hosts") {
			t.Errorf("http to another host: %d %q", code, body)
		}
	}

	if s := p.Stats(); s.Allowed != 2 || s.Refused["other.test"] != 1 || len(s.Refused) != 1 {
		t.Errorf("https proxy stats %+v", s)
	}
	if s := pp.Stats(); s.Allowed != 1 || s.Refused["mirror.test"] != 2 {
		t.Errorf("http proxy stats %+v", s)
	}
	if len(reached) != 3 {
		t.Errorf("the upstream saw %v, want the three allowed requests only", reached)
	}
}

// TestNeverReachesTheHostItself: whatever an allowed name resolves to, the
// default dialer refuses loopback and link-local destinations.
func TestNeverReachesTheHostItself(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "host service") }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	p := New([]string{"localhost", "127.0.0.1", "169.254.169.254"}, nil, nil)
	if err := p.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	c := client(p, nil)
	for _, u := range []string{"http://localhost:" + port + "/", "http://127.0.0.1:" + port + "/", "http://169.254.169.254/latest/meta-data/"} {
		if code, body := get(t, c, u); code != http.StatusBadGateway || !strings.Contains(body, "loopback, link-local") {
			t.Errorf("%s: %d %q, want 502 naming why", u, code, body)
		}
	}
	if s := p.Stats(); s.Failed != 3 {
		t.Errorf("stats %+v", s)
	}
}

// TestRefusedHostsAreBounded: an agent trying endless names does not grow
// the record without bound.
func TestRefusedHostsAreBounded(t *testing.T) {
	p := New(nil, nil, nil)
	for i := range maxRefusedListed + 50 {
		p.count(fmt.Sprintf("h%d.test", i), false)
	}
	p.count("h0.test", false)
	s := p.Stats()
	if len(s.Refused) != maxRefusedListed+1 || s.Refused["(others)"] != 50 || s.Refused["h0.test"] != 2 {
		t.Errorf("%d hosts listed, others %d, h0 %d", len(s.Refused), s.Refused["(others)"], s.Refused["h0.test"])
	}
}

// TestCloseEndsOpenTunnels: Close does not wait for a client that keeps a
// CONNECT tunnel open.
func TestCloseEndsOpenTunnels(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open until the listener closes
		}
	}()
	p := New([]string{"slow.test"}, func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, ln.Addr().String())
	}, nil)
	if err := p.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT slow.test:443 HTTP/1.1\r\nHost: slow.test:443\r\n\r\n")
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	if !strings.Contains(string(buf[:n]), "200") {
		t.Fatalf("CONNECT answered %q", buf[:n])
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(buf); err == nil {
		t.Error("the client's tunnel is still open after Close")
	}
}

// TestLifecycle: New does no I/O (a proxy never opened closes at once);
// the proxy serves from Open until Close, not until Open's context ends;
// after Close nothing listens.
func TestLifecycle(t *testing.T) {
	if err := New(nil, nil, nil).Close(t.Context()); err != nil {
		t.Errorf("closing a proxy never opened: %v", err)
	}
	p := New([]string{"allowed.test"}, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	if err := p.Open(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if code, body := get(t, client(p, nil), "http://refused.test/"); code != http.StatusForbidden {
		t.Errorf("after Open's context ended: %d %q; want the proxy's 403", code, body)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Error("the proxy still listens after Close")
	}
}
