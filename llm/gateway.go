package llm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/troupebench/troupe/internal/secret"
)

// ContainerURL is where agents inside a trial container reach the gateway,
// through the tunnel: the base URL an OpenAI or Anthropic SDK is given.
const ContainerURL = "http://127.0.0.1:3601"

// Gateway is the metering gateway. Create it with New, adjust its fields,
// then Open it; Close stops it and waits for what it started.
type Gateway struct {
	// Addr is the TCP address to listen on; port 0 picks a free port.
	Addr      string
	Endpoints Endpoints
	// Getenv reads the host environment for api_key_env (os.Getenv).
	Getenv func(string) string
	// Scenarios holds the built-in mock scenarios as <name>.yaml.
	Scenarios fs.FS
	// ScenarioDir is where a scenario given as a relative file path is read.
	ScenarioDir string
	// Transport reaches real upstreams (a clone of http.DefaultTransport).
	Transport http.RoundTripper
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes int64
	// BodyTimeout bounds the reading of a request's body, and IdleTimeout
	// how long a kept-alive connection may wait for its next request (the
	// headers have 30 s): an agent's stalled or idle connections must not
	// pile up in the gateway every trial of the job shares. Zero means the
	// defaults New sets.
	BodyTimeout time.Duration
	IdleTimeout time.Duration
	// RetryBase is the first backoff of an upstream call's retries (when
	// the upstream asks for no wait); 0 is 500 ms. Tests shorten it.
	RetryBase time.Duration
	// DrainGrace is how long the gateway keeps reading a real upstream's
	// answer that has started after its agent hung up or its trial closed,
	// for the usage the provider reports at the end and bills anyway. Calls
	// that can bring no such figure are ended at once.
	DrainGrace time.Duration
	// TurnGrace is how long, after a trial's DONE: (Trial.FreezeAfterTurns),
	// its agents' turns in progress have to end: each agent whose last
	// answer asked for tools gets the calls that continue its turn.
	TurnGrace time.Duration
	Logger    *slog.Logger
	Now       func() time.Time
	// KeysOptional lets an endpoint's key be missing from the environment:
	// its calls then reach the upstream with no key. A replay that never
	// goes live needs none.
	KeysOptional bool

	keys     map[string]secret.Secret // endpoint name -> real key
	scrubber *secret.Scrubber         // finds the keys; each trial's adds its tokens
	proxy    *httputil.ReverseProxy
	mock     *mockTransport

	ln       net.Listener
	srv      *http.Server
	url      string
	wg       sync.WaitGroup
	serveErr error

	mu        sync.Mutex
	open      bool
	closed    bool
	grants    map[string]*agentState // token -> grant
	trials    map[*Trial]struct{}    // open, for Close to end
	faults    []*faultState
	scenarios map[string]*Scenario
}

// New returns a gateway for the given endpoints, listening on a free
// loopback port once opened.
func New(endpoints Endpoints) *Gateway {
	return &Gateway{
		Addr:            "127.0.0.1:0",
		Endpoints:       endpoints,
		Getenv:          os.Getenv,
		MaxRequestBytes: 64 << 20,
		BodyTimeout:     time.Minute,
		IdleTimeout:     2 * time.Minute,
		DrainGrace:      10 * time.Second,
		TurnGrace:       2 * time.Second,
	}
}

// Open reads every configured endpoint's key from the environment (a
// missing variable is an error naming it), then listens and serves.
func (g *Gateway) Open(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open || g.closed {
		return errors.New("llm: Open called twice")
	}
	if g.Logger == nil {
		g.Logger = slog.New(slog.DiscardHandler)
	}
	if g.Now == nil {
		g.Now = time.Now
	}
	if g.Getenv == nil {
		g.Getenv = os.Getenv
	}
	if g.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 15 * time.Minute
		g.Transport = t
	}
	g.keys = map[string]secret.Secret{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(g.Endpoints)) {
		ep := g.Endpoints[name]
		if ep.APIKeyEnv == "" {
			continue
		}
		key := g.Getenv(ep.APIKeyEnv)
		if key == "" && g.KeysOptional {
			g.Logger.Warn("no key for endpoint: its calls reach the upstream without one", "endpoint", name, "env", ep.APIKeyEnv)
			continue
		}
		if key == "" {
			errs = append(errs, fmt.Errorf("endpoint %s: environment variable %s is not set; export it on the host that runs troupe", name, ep.APIKeyEnv))
			continue
		}
		g.keys[name] = secret.New(key)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("llm: %w", err)
	}
	g.scrubber = secret.NewScrubber(slices.Collect(maps.Values(g.keys))...)
	g.grants = map[string]*agentState{}
	g.trials = map[*Trial]struct{}{}
	g.scenarios = map[string]*Scenario{}
	g.mock = &mockTransport{now: g.Now}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      roundTripper(g.route),
		ModifyResponse: g.meterResponse,
		ErrorHandler:   g.proxyError,
		BufferPool:     copyBuffers,
		ErrorLog:       log.New(proxyLog{g}, "", 0),
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", g.Addr)
	if err != nil {
		return fmt.Errorf("llm: listen on %s: %w", g.Addr, err)
	}
	g.ln, g.url = ln, "http://"+ln.Addr().String()
	g.BodyTimeout = cmp.Or(g.BodyTimeout, time.Minute)
	// No ReadTimeout or WriteTimeout: a streamed answer may take many
	// minutes, and a read deadline left on the connection would end its
	// call. The body's deadline is set, and lifted, in ServeHTTP.
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: cmp.Or(g.IdleTimeout, 2*time.Minute)}
	g.open = true
	g.wg.Go(func() {
		if err := g.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			g.mu.Lock()
			g.serveErr = err
			g.mu.Unlock()
		}
	})
	return nil
}

// URL is the gateway's base URL on the host (http://host:port).
func (g *Gateway) URL() string { return g.url }

// String names the gateway by its address. A Gateway holds the real keys
// and every trial's tokens, so it never prints its fields.
func (g *Gateway) String() string { return "llm gateway at " + cmp.Or(g.url, "(not open)") }

// Format prints String for every verb, %#v and %d included.
func (g *Gateway) Format(f fmt.State, _ rune) { io.WriteString(f, g.String()) }

// LogValue is the gateway in slog: its address and endpoints, never a key.
func (g *Gateway) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", g.url), slog.Any("endpoints", slices.Sorted(maps.Keys(g.Endpoints))))
}

// proxyLog takes what httputil.ReverseProxy logs (copy errors, mostly) to
// the gateway's logger at debug level, scrubbed of the keys.
type proxyLog struct{ g *Gateway }

func (p proxyLog) Write(b []byte) (int, error) {
	p.g.Logger.Debug(string(bytes.TrimSpace(p.g.scrubber.Scrub(b))), "from", "proxy")
	return len(b), nil
}

// Close stops accepting calls and closes every trial still open, as
// Trial.Close does (calls that can bring no usage figure end at once, the
// others within DrainGrace and ctx); then it waits for the server.
func (g *Gateway) Close(ctx context.Context) error {
	g.mu.Lock()
	if !g.open || g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	trials := slices.Collect(maps.Keys(g.trials))
	g.mu.Unlock()
	errs := make([]error, len(trials), len(trials)+2)
	var wg sync.WaitGroup
	for i, t := range trials {
		wg.Go(func() { errs[i] = t.Close(ctx) })
	}
	wg.Wait()
	if err := g.srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("llm: shut down: %w", err))
		g.srv.Close()
	}
	g.wg.Wait()
	if g.serveErr != nil {
		errs = append(errs, fmt.Errorf("llm: serve: %w", g.serveErr))
	}
	return errors.Join(errs...)
}

func (g *Gateway) endpoint(name string) (Endpoint, bool) { return g.Endpoints.Lookup(name) }
