// Package egress is the allowlist proxy: for a task whose network_mode is
// "allowlist", the trial container keeps no network, and its only way to
// the hosts the task allows is this HTTP(S) proxy on the host, reached
// through the trial's tunnel. It lets through CONNECT to an allowed host
// name and plain HTTP requests for one, refuses everything else with 403,
// and counts both, so that a trial's record says what its agents tried.
//
// Hosts are matched by name, as the client gave them: "pypi.org" matches
// that name only, "*.example.com" its subdomains (not example.com itself).
// An IP address matches only when it is listed as such. The default dialer
// refuses, after resolution, every address of the host itself and every
// loopback, link-local, private, shared or reserved address whatever name
// led there (Refusal), so an allowed name cannot be pointed at the host's
// own services, a trial network's gateway or a cloud metadata endpoint.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxRefusedListed bounds how many distinct refused hosts are kept by name;
// the rest are counted together.
const maxRefusedListed = 100

// DialFunc opens a connection to an upstream. Tests give one that reaches
// a local server; the default refuses local destinations (see the package
// documentation).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Stats is what a proxy let through and refused: the trial's record.
type Stats struct {
	// Allowed counts requests and tunnels to allowed hosts.
	Allowed int `json:"allowed"`
	// Refused counts refusals by host (port left out); hosts past the
	// first 100 distinct ones are counted under "(others)".
	Refused map[string]int `json:"refused"`
	// Failed counts allowed requests whose upstream could not be reached.
	Failed int `json:"failed"`
}

// Proxy is one trial's allowlist proxy. Create it with New, serve it with
// Open, end it with Close.
type Proxy struct {
	hosts []string
	dial  DialFunc
	log   *slog.Logger

	srv *http.Server
	ln  net.Listener
	wg  sync.WaitGroup
	// serveErr is why serving stopped, when it was not Close.
	serveErr error
	// ctx ends the tunnels of CONNECT requests when the proxy closes; it
	// is made by Open.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	stats   Stats
	closed  bool
	tunnels sync.WaitGroup // CONNECT tunnels being spliced
}

// New makes a proxy that allows hosts (lower case names, "*.suffix"
// wildcards), with no I/O; Open serves it. dial nil is the default
// dialer; log nil discards.
func New(hosts []string, dial DialFunc, log *slog.Logger) *Proxy {
	if dial == nil {
		dial = defaultDial
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{hosts: slices.Clone(hosts), dial: dial, log: log, stats: Stats{Refused: map[string]int{}}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	return p
}

// Open listens on a free port of the host's loopback and serves there
// until Close, whatever becomes of ctx. Addr says where.
func (p *Proxy) Open(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("egress: listen: %w", err)
	}
	p.ln = ln
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.wg.Go(func() {
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("egress proxy stopped", "err", err)
			p.serveErr = fmt.Errorf("egress: serve: %w", err)
		}
	})
	return nil
}

// Addr is the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops the proxy, ends its open tunnels and waits for them (which
// is immediate: ctx bounds nothing here). It returns what stopped the
// server early, if anything did, joined with what closing it met. A proxy
// never opened has nothing to stop.
func (p *Proxy) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	err := p.srv.Close()
	p.wg.Wait()
	p.tunnels.Wait()
	return errors.Join(p.serveErr, err)
}

// Stats returns a copy of the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Allowed: p.stats.Allowed, Refused: maps.Clone(p.stats.Refused), Failed: p.stats.Failed}
}

func (p *Proxy) count(host string, allowed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case allowed:
		p.stats.Allowed++
	case p.stats.Refused[host] > 0 || len(p.stats.Refused) < maxRefusedListed:
		p.stats.Refused[host]++
	default:
		p.stats.Refused["(others)"]++
	}
}

func (p *Proxy) failed() {
	p.mu.Lock()
	p.stats.Failed++
	p.mu.Unlock()
}

// Allowed reports whether host (a name or an address, without a port) is
// one the proxy lets through.
func (p *Proxy) Allowed(host string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Match(p.hosts, host)
}

// SetHosts replaces the allowed hosts, for the next phase of a trial;
// tunnels already open stay open.
func (p *Proxy) SetHosts(hosts []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hosts = slices.Clone(hosts)
}

// Match reports whether host matches one of the patterns: an exact name,
// or "*.suffix" for any name below suffix. Names compare case-insensitively
// and without a trailing dot.
func Match(patterns []string, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	for _, pat := range patterns {
		pat = strings.TrimSuffix(strings.ToLower(pat), ".")
		if suffix, ok := strings.CutPrefix(pat, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) && len(host) > len(suffix)+1 {
				return true
			}
			continue
		}
		if host == pat {
			return true
		}
	}
	return false
}

// ServeHTTP handles CONNECT host:port and absolute-form HTTP requests.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodConnect {
		p.connect(w, req)
		return
	}
	if req.URL.Host == "" || req.URL.Scheme != "http" {
		http.Error(w, "troupe egress proxy: send absolute http:// requests or CONNECT", http.StatusBadRequest)
		return
	}
	host := req.URL.Hostname()
	if !p.Allowed(host) {
		p.refuse(w, host)
		return
	}
	p.count(host, true)
	out := req.Clone(req.Context())
	out.RequestURI = ""
	removeHopHeaders(out.Header)
	tr := &http.Transport{DialContext: p.dial, Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(out)
	if err != nil {
		p.failed()
		http.Error(w, "troupe egress proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	maps.Copy(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (p *Proxy) refuse(w http.ResponseWriter, host string) {
	p.count(host, false)
	p.log.Info("egress refused", "host", host)
	http.Error(w, fmt.Sprintf("troupe egress proxy: %s is not among the task's allowed_hosts", host), http.StatusForbidden)
}

func (p *Proxy) connect(w http.ResponseWriter, req *http.Request) {
	host, port, err := net.SplitHostPort(req.Host)
	if err != nil {
		http.Error(w, "troupe egress proxy: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	if !p.Allowed(host) {
		p.refuse(w, host)
		return
	}
	p.count(host, true)
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	up, err := p.dial(ctx, "tcp", net.JoinHostPort(host, port))
	cancel()
	if err != nil {
		p.failed()
		http.Error(w, "troupe egress proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "troupe egress proxy: cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	client, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		client.Close()
		up.Close()
		return
	}
	p.tunnels.Add(1)
	p.mu.Unlock()
	defer p.tunnels.Done()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		up.Close()
		return
	}
	// Bytes the client sent after its request are already buffered.
	if n := rw.Reader.Buffered(); n > 0 {
		buffered, _ := rw.Reader.Peek(n)
		if _, err := up.Write(buffered); err != nil {
			client.Close()
			up.Close()
			return
		}
	}
	splice(p.ctx, client, up)
}

// splice copies both ways until either side ends or ctx does, then closes
// both.
func splice(ctx context.Context, a, b net.Conn) {
	stop := context.AfterFunc(ctx, func() { a.Close(); b.Close() })
	defer stop()
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if c, ok := dst.(interface{ CloseWrite() error }); ok {
			c.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Go(func() { half(a, b) })
	half(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// errLocal refuses a destination on the host itself, on a private or
// otherwise non-public network.
var errLocal = errors.New("the destination is an address of this host or a loopback, link-local, private, shared or reserved address, which the egress proxy never reaches")

// nonPublic are the IPv4 and IPv6 ranges, beyond what netip classifies,
// that are no host on the internet: shared address space (carrier NAT),
// IETF protocol assignments, the documentation and benchmark networks,
// reserved and broadcast, NAT64's well-known prefix aside.
var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "2001:db8::/32", "100::/64", "2001::/23"} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Refusal says why the proxy never connects to ip, or nil when it may: an
// address of this host (own lists them), loopback, link-local, private
// (RFC 1918, unique local), multicast, unspecified or another non-public
// range. It is checked on the address actually dialled, after the name was
// resolved, so no allowed name can be pointed at the host's own services,
// a trial network's gateway or a cloud metadata endpoint.
func Refusal(ip netip.Addr, own []netip.Addr) error {
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() ||
		ip.IsMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsPrivate() {
		return fmt.Errorf("%s: %w", ip, errLocal)
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return fmt.Errorf("%s: %w", ip, errLocal)
		}
	}
	if slices.Contains(own, ip) {
		return fmt.Errorf("%s: %w", ip, errLocal)
	}
	return nil
}

// hostAddrs lists this host's own addresses, on every interface.
func hostAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("egress: list this host's addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

func defaultDial(ctx context.Context, network, addr string) (net.Conn, error) {
	return guardedDial(nil)(ctx, network, addr)
}

// guardedDial dials through resolver (nil: the system's) and refuses, just
// before each connect, the addresses Refusal names.
func guardedDial(resolver *net.Resolver) DialFunc {
	d := net.Dialer{Timeout: 30 * time.Second, Resolver: resolver, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		// Read at each connect: a bridge made since (another trial's
		// network) is an address of the host too.
		own, err := hostAddrs()
		if err != nil {
			return err
		}
		return Refusal(ap.Addr(), own)
	}}
	return d.DialContext
}
