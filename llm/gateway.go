package llm

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
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
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/modelcall"
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

// call is one request in flight, carried through the proxy in its context.
type call struct {
	st  *agentState
	api modelcall.API
	// ctx is the call's own: it outlives an agent that hangs up or a trial
	// that closes only while that can still bring a usage figure (see end).
	ctx      context.Context
	cancel   context.CancelCauseFunc
	mock     bool
	answered atomic.Bool // the upstream's response headers are in
	// held marks a call waiting with no end in sight (a scripted or
	// injected hang, a replay holding it past its recording): Settle cuts
	// it at once.
	held atomic.Bool
	// admitted: counted against the budgets. A call that is not is
	// metered as uncounted.
	admitted bool

	mu    sync.Mutex // guards drain and over
	drain *time.Timer
	over  bool

	stream     bool
	start      time.Time
	firstByte  time.Time
	status     int
	retryAfter string
	usage      modelcall.Usage
	usageSeen  bool
	complete   bool
	errClass   string
	errMsg     string
	fault      string
	cutAfter   int
	settled    bool
	// asked is what the request asked beside its messages.
	asked *modelcall.Asked
	// request and answer are the call whole, for the agent's conversation
	// record (nil and empty when it keeps none).
	request       []byte
	answer        bytes.Buffer
	answerOmitted int
	// countTokens marks a call to /v1/messages/count_tokens: answered, but
	// never charged, counted against the budgets, disturbed by a fault or
	// recorded, for it is not a model call.
	countTokens bool
	// replayed is the recorded call a replay answers this one with; live
	// marks a replay's call sent to the endpoint after a divergence.
	replayed *modelcall.Call
	live     bool
}

type callKey struct{}

func callOf(r *http.Request) *call { return r.Context().Value(callKey{}).(*call) }

// Why a call ended before its answer did: the cause of its context.
var (
	errAgentGone   = errors.New("the agent hung up")
	errTrialClosed = errors.New("the trial ended")
)

// newCall starts a call of agent st. Its context keeps the agent request's
// values but not its cancellation, which end decides.
func newCall(st *agentState, api modelcall.API, r *http.Request, now time.Time) *call {
	c := &call{st: st, api: api, start: now, mock: st.endpoint.API == Mock}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	c.ctx, c.cancel = context.WithValue(ctx, callKey{}, c), cancel
	return c
}

// end stops a call whose agent hung up or whose trial closed, unless reading
// on still buys a usage figure. A real upstream's answer that has started
// reports its usage at its end, and the provider bills those tokens either
// way: it is read on for at most grace. Any other call is cancelled at once:
// a mock bills nothing, and an upstream that has not answered has no figure
// to give. end may be called more than once; the first grace holds.
func (c *call) end(cause error, grace time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.over:
	case c.mock || !c.answered.Load():
		c.cancel(cause)
	case c.drain == nil:
		c.drain = time.AfterFunc(grace, func() {
			c.cancel(fmt.Errorf("%w, and the upstream's answer did not end within the drain grace (%v)", cause, grace))
		})
	}
}

// release ends the call's context and its drain timer once the call is
// answered and recorded.
func (c *call) release() {
	c.mu.Lock()
	c.over = true
	if c.drain != nil {
		c.drain.Stop()
	}
	c.mu.Unlock()
	c.cancel(nil)
}

// refuseEnded refuses a call that arrives after its trial's end decision
// (Trial.Freeze): 410 with error type trial_ended, which neither official
// SDK retries, nor the reference agent.
func (c *call) refuseEnded(w http.ResponseWriter) {
	c.status, c.errClass = http.StatusGone, modelcall.ClassTrialEnded
	c.errMsg = "the trial has ended: troupe's gateway takes no more calls for it"
	w.Header().Set("X-Should-Retry", "false")
	writeError(w, c.api, c.status, modelcall.ClassTrialEnded, c.errMsg)
}

// gone records a call ended before it was forwarded or answered, and
// tells the agent why, in case it is still there (its trial ended).
func (c *call) gone(w http.ResponseWriter, where string) {
	c.status, c.errClass = http.StatusBadGateway, modelcall.ClassDisconnect
	c.errMsg = fmt.Sprintf("%v %s", context.Cause(c.ctx), where)
	writeError(w, c.api, c.status, "api_error", c.errMsg)
}

// ServeHTTP answers /v1/chat/completions, /v1/responses, /v1/messages,
// /v1/messages/count_tokens and /v1/models.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var api modelcall.API
	countTokens := false
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		api = modelcall.OpenAI
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		api = modelcall.OpenAIResponses
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		api = modelcall.Anthropic
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		api, countTokens = modelcall.Anthropic, true
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		g.serveModels(w, r)
		return
	default:
		writeError(w, modelcall.OpenAI, http.StatusNotFound, "not_found", "troupe's gateway serves POST /v1/chat/completions, POST /v1/responses, POST /v1/messages, POST /v1/messages/count_tokens and GET /v1/models")
		return
	}
	st := g.grant(r)
	if st == nil {
		writeError(w, api, http.StatusUnauthorized, "authentication_error", unknownToken)
		return
	}
	c := newCall(st, api, r, g.Now())
	c.countTokens = countTokens
	if !st.trial.enter(c) {
		c.release()
		writeError(w, api, http.StatusUnauthorized, "authentication_error", unknownToken)
		return
	}
	// Deferred calls run last first: the record is written while the call's
	// context still says why it ended, then the call is let go.
	defer st.trial.leave(c)
	defer c.release()
	defer g.finish(c) // every call the gateway answers has its record
	stop := context.AfterFunc(r.Context(), func() { c.end(errAgentGone, g.DrainGrace) })
	defer stop()
	ep := st.endpoint
	refuse := func(status int, msg string) {
		c.status, c.errClass, c.errMsg = status, modelcall.ClassBadRequest, msg
		writeError(w, api, status, "invalid_request_error", msg)
	}
	if !speaks(ep.API, api) {
		path := map[modelcall.API]string{modelcall.OpenAI: "/v1/chat/completions", modelcall.Anthropic: "/v1/messages"}[ep.API]
		msg := fmt.Sprintf("endpoint %s speaks the %s API; call %s", ep.Name, ep.API, path)
		if api == modelcall.OpenAIResponses {
			msg = fmt.Sprintf("endpoint %s does not speak OpenAI's Responses API (/v1/responses): it speaks the %s API; call %s", ep.Name, ep.API, path)
		}
		refuse(http.StatusBadRequest, msg)
		return
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(g.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.MaxRequestBytes))
	switch _, tooLarge := errors.AsType[*http.MaxBytesError](err); {
	case tooLarge:
		refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", g.MaxRequestBytes))
		return
	case isTimeout(err):
		// The rest of the body is not waited for: the connection closes.
		w.Header().Set("Connection", "close")
		c.status, c.errClass, c.errMsg = http.StatusRequestTimeout, modelcall.ClassDisconnect, fmt.Sprintf("%sthe body did not arrive within %s", modelcall.RequestCut, g.BodyTimeout)
		writeError(w, api, http.StatusRequestTimeout, "invalid_request_error", c.errMsg)
		return
	case err != nil:
		c.errClass, c.errMsg = modelcall.ClassDisconnect, modelcall.RequestCut+err.Error()
		return
	}
	rc.SetReadDeadline(time.Time{}) // the answer may take longer; a hang-up still ends it
	body, c.stream, c.asked, err = rewriteBody(api, body, ep.Model)
	if st.spec.Conversation != nil && err == nil {
		c.request = body
	}
	if err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}
	if st.ended() { // before a replay takes the call from its recording
		c.refuseEnded(w)
		return
	}
	if c.countTokens { // free: not counted against the budgets, not disturbed
		g.forward(w, r, c, body)
		return
	}
	if st.replay != nil && !g.replayCall(w, c, body) {
		return
	}
	refusal, frozen := st.admit()
	if frozen && refusal == nil {
		c.refuseEnded(w)
		return
	}
	c.admitted = refusal == nil
	if refusal != nil {
		c.status, c.errClass, c.errMsg = http.StatusTooManyRequests, modelcall.ClassBudgetExhausted, refusal.Error()
		// A spent budget stays spent: both official SDKs would otherwise
		// retry a 429, to be refused again.
		w.Header().Set("X-Should-Retry", "false")
		writeError(w, api, http.StatusTooManyRequests, modelcall.ClassBudgetExhausted, refusal.Error())
		return
	}
	if f := g.takeFault(st); f != nil && c.replayed == nil { // a replayed call had its faults
		c.fault = f.String()
		if !f.apply(w, c) {
			return
		}
	}
	g.forward(w, r, c, body)
}

// forward sends the rewritten body upstream (or to the mock) in the call's
// own context.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, c *call, body []byte) {
	out := r.Clone(c.ctx)
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	g.proxy.ServeHTTP(w, out)
}

// speaks says whether an endpoint answers calls in a wire format: a mock
// answers every one, an openai upstream chat completions and the Responses
// API, an anthropic upstream messages.
func speaks(endpoint, call modelcall.API) bool {
	return endpoint == Mock || endpoint == call || (endpoint == modelcall.OpenAI && call == modelcall.OpenAIResponses)
}

const unknownToken = "unknown or revoked troupe gateway token; use the token troupe gave this agent"

// rewriteBody replaces the model with the endpoint's, so an agent cannot
// choose another, and asks OpenAI streams to report usage. (A Responses
// stream always reports it, and would refuse stream_options.include_usage.)
func rewriteBody(api modelcall.API, body []byte, model string) ([]byte, bool, *modelcall.Asked, error) {
	r, err := modelcall.ParseRequest(api, body)
	if err != nil {
		return nil, false, nil, fmt.Errorf("request body is not a JSON object: %v", err)
	}
	if api == modelcall.OpenAIResponses && r.Background() {
		// Not meterable: a background response answers at once and bills
		// later, out of the gateway's sight.
		return nil, false, nil, errors.New("background responses are not served: troupe's gateway meters a call by its answer, and a background response answers later; leave background unset")
	}
	asked := r.Asked()
	req := r.Fields
	req["model"], _ = json.Marshal(model)
	stream := r.Stream()
	if stream && api == modelcall.OpenAI {
		var opts map[string]json.RawMessage
		if raw, ok := req["stream_options"]; !ok || json.Unmarshal(raw, &opts) != nil || opts == nil {
			opts = map[string]json.RawMessage{} // absent, null or not an object
		}
		opts["include_usage"] = json.RawMessage("true")
		req["stream_options"], _ = json.Marshal(opts)
	}
	out, err := json.Marshal(req)
	return out, stream, asked, err
}

// grant finds the agent a request's token belongs to. The OpenAI SDK sends
// "Authorization: Bearer"; the Anthropic SDK sends "x-api-key".
func (g *Gateway) grant(r *http.Request) *agentState {
	token := r.Header.Get("x-api-key")
	if auth := r.Header.Get("Authorization"); token == "" && strings.HasPrefix(auth, "Bearer ") {
		token = strings.TrimPrefix(auth, "Bearer ")
	}
	if token == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.grants[token]
}

// serveModels lists the one model the agent may use, in the shape of the
// API its client speaks.
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request) {
	api := modelcall.OpenAI
	if r.Header.Get("anthropic-version") != "" {
		api = modelcall.Anthropic
	}
	st := g.grant(r)
	if st == nil {
		writeError(w, api, http.StatusUnauthorized, "authentication_error", "unknown or revoked troupe gateway token")
		return
	}
	name := st.spec.Endpoint
	var body any = map[string]any{"object": "list", "data": []any{map[string]any{"id": name, "object": "model", "created": 0, "owned_by": "troupe"}}}
	if api == modelcall.Anthropic {
		body = map[string]any{"data": []any{map[string]any{"type": "model", "id": name, "display_name": name, "created_at": "1970-01-01T00:00:00Z"}}, "has_more": false, "first_id": name, "last_id": name}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

// rewrite points the outgoing request at the endpoint's upstream with the
// real key, and strips what must not travel: the agent's token, cookies,
// forwarding headers.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	c := callOf(pr.In)
	ep := c.st.endpoint
	h := pr.Out.Header
	// Accept-Encoding goes too: the transport then asks for gzip itself and
	// decompresses, so the meter reads usage from plain JSON, never from
	// compressed bytes it cannot parse. The organisation, project and
	// workspace headers would bill the host's key to an account the agent
	// chose.
	for _, k := range []string{"Authorization", "X-Api-Key", "Cookie", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Accept-Encoding", "OpenAI-Organization", "OpenAI-Project", "Anthropic-Workspace-Id"} {
		h.Del(k)
	}
	base := ep.BaseURL
	if ep.API == Mock {
		base = "http://mock.invalid"
	}
	path := "/chat/completions"
	if c.api == modelcall.OpenAIResponses {
		path = "/responses"
	}
	if c.api == modelcall.Anthropic {
		path = "/v1/messages"
		if c.countTokens {
			path = "/v1/messages/count_tokens"
		}
		if h.Get("anthropic-version") == "" {
			h.Set("anthropic-version", "2023-06-01")
		}
	}
	if ep.API == Mock && c.api != modelcall.Anthropic {
		path = "/v1" + path
	}
	u, _ := url.Parse(base + path)
	pr.Out.URL, pr.Out.Host = u, ""
	if key, ok := g.keys[ep.Name]; ok { // the one place the key is revealed
		if c.api == modelcall.Anthropic {
			h.Set("X-Api-Key", key.Reveal())
		} else {
			h.Set("Authorization", "Bearer "+key.Reveal())
		}
	}
}

// roundTripper adapts a function to http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// route sends mock endpoints' calls to the in-process mock, others upstream.
func (g *Gateway) route(r *http.Request) (*http.Response, error) {
	c := callOf(r)
	if c.replayed != nil {
		return g.replayResponse(r, c), nil
	}
	if c.countTokens && c.st.replay != nil && !c.st.live() {
		// Not recorded, and a replay asks no upstream: the mock's estimate.
		return g.mock.RoundTrip(r)
	}
	if c.st.endpoint.API == Mock {
		return g.mock.RoundTrip(r)
	}
	return g.Transport.RoundTrip(r)
}

// meterResponse keeps the headers the APIs define and meters the body: a
// plain answer is read whole here (it is small), scrubbed of the real key,
// priced and settled before the agent sees a byte; a stream is wrapped so
// usage is read as it passes.
func (g *Gateway) meterResponse(resp *http.Response) error {
	c := callOf(resp.Request)
	c.answered.Store(true)
	c.firstByte = g.Now() // the response's first bytes, its headers, are here
	c.status = resp.StatusCode
	scrub := c.st.trial.scrubber
	keepAPIHeaders(resp.Header, scrub)
	// No trailer is an API's. The transport fills them in as the body ends:
	// here for a plain answer, read whole below; in the meter's Close for
	// the rest.
	defer func() { resp.Trailer = nil }()
	c.retryAfter = resp.Header.Get("Retry-After")
	c.errClass = classifyStatus(resp.StatusCode)
	br := readers.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	m := &meter{resp: resp, body: resp.Body, br: br, c: c, scrub: scrub, settle: func() { g.finish(c) }}
	resp.Body = m
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		m.sse = true
		// Without a length the agent sees the stream end only when the
		// handler returns, after the meter has settled a stream that ends
		// with no end marker; with one, it could call again first.
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(br, maxCapture+1))
	if err != nil {
		c.errClass, c.errMsg = modelcall.ClassDisconnect, "reading the upstream's answer: "+err.Error()
		return err
	}
	if len(data) > maxCapture {
		m.pending, m.rest = data, true // too big to hold: it passes through
		return nil
	}
	if u, ok := modelcall.ResponseUsage(c.api, data); ok {
		c.usage, c.usageSeen = u, true
	}
	if (c.status == http.StatusUnauthorized || c.status == http.StatusForbidden) && c.st.endpoint.API != Mock {
		// What the provider says about the key is for the host's eyes.
		c.errMsg = fmt.Sprintf("the upstream refused the key of endpoint %s (%d): %s", c.st.endpoint.Name, c.status, clip.Head(string(scrub.Scrub(data)), 300))
		data = errorBody(c.api, "authentication_error", fmt.Sprintf("the upstream of endpoint %s refused troupe's key (%d); troupe's log has its answer", c.st.endpoint.Name, c.status))
		resp.Header.Set("Content-Type", "application/json")
	} else {
		data = scrub.Scrub(data)
		if c.status >= 400 {
			c.errMsg = clip.Head(string(data), 300)
		}
	}
	resp.ContentLength = int64(len(data))
	resp.Header.Set("Content-Length", strconv.Itoa(len(data)))
	c.keepAnswer(data)
	m.pending = data
	c.complete = true
	g.finish(c)
	return nil
}

// keepAPIHeaders drops every response header but those the APIs define and
// their SDKs read, and scrubs what is left like a body: an upstream's
// cookies, vendor and organisation headers, or a debugging echo of the
// request (the real key), stay on the host. An allow-list, because a
// deny-list fails open on the next header a provider invents.
func keepAPIHeaders(h http.Header, scrub *secret.Scrubber) {
	for k, vs := range h {
		if !apiHeader(http.CanonicalHeaderKey(k)) {
			delete(h, k)
			continue
		}
		for i, v := range vs {
			if scrub.Contains([]byte(v)) {
				vs[i] = string(scrub.Scrub([]byte(v)))
			}
		}
	}
}

// apiHeader says whether a response header (in canonical form) reaches the
// agent: the content's type, length and encoding, request ids, rate limits
// and retry hints (X-Should-Retry is the providers' own, which both official
// SDKs obey).
func apiHeader(k string) bool {
	switch k {
	case "Content-Type", "Content-Length", "Content-Encoding",
		"X-Request-Id", "Request-Id", "Retry-After", "Retry-After-Ms", "X-Should-Retry":
		return true
	}
	return strings.HasPrefix(k, "X-Ratelimit-") || strings.HasPrefix(k, "Anthropic-Ratelimit-")
}

// proxyError answers a call whose upstream could not be reached or failed
// before answering, in the API's error shape. The agent may be gone; the
// answer is written all the same, for an agent whose trial ended.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	c := callOf(r)
	scrub := c.st.trial.scrubber
	c.errMsg = string(scrub.Scrub([]byte(err.Error())))
	status, typ := http.StatusBadGateway, "api_error"
	switch cause := context.Cause(c.ctx); {
	case cause != nil: // the agent hung up, or the trial ended
		c.errClass = modelcall.ClassDisconnect
		c.errMsg = fmt.Sprintf("%v before the upstream answered", cause)
		if c.answered.Load() {
			c.errMsg = fmt.Sprintf("%v while the upstream's answer was read", cause)
		}
		c.errMsg = string(scrub.Scrub([]byte(c.errMsg)))
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		c.errClass, status, typ = modelcall.ClassTimeout, http.StatusGatewayTimeout, "timeout_error"
	default:
		c.errClass = modelcall.ClassUnreachable
	}
	c.status = status
	writeError(w, c.api, status, typ, fmt.Sprintf("upstream of endpoint %s: %s", c.st.endpoint.Name, c.errMsg))
}

func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// finish prices the call, writes its record and settles the budgets, once.
// The meter calls it as the response completes; ServeHTTP's deferred call
// covers every other ending, even the proxy aborting a cut stream by
// panicking.
func (g *Gateway) finish(c *call) {
	if c.settled {
		return
	}
	c.settled = true
	st := c.st
	if c.countTokens { // not a model call: no record, no charge
		g.Logger.Debug("count_tokens", "trial", st.trial.spec.ID, "agent", st.spec.ID, "endpoint", st.endpoint.Name, "status", c.status, "error", c.errMsg)
		return
	}
	if c.errClass == modelcall.ClassTrialEnded {
		// After the trial's end decision: no part of the trial, in no
		// file of it. Whether its agent asks it before it is swept is a
		// matter of timing, and the trial's figures are not: the
		// gateway's log says it.
		g.Logger.Info("call after the trial's end refused", "trial", st.trial.spec.ID, "agent", st.spec.ID, "endpoint", st.endpoint.Name)
		return
	}
	end := g.Now()
	r := modelcall.Record{
		Time: c.start.UTC(), Trial: st.trial.spec.ID, Agent: st.spec.ID, Endpoint: st.endpoint.Name,
		Model: st.endpoint.Model, API: c.api, Stream: c.stream, Status: c.status,
		LatencyMS: ms(end.Sub(c.start)), ErrorClass: c.errClass, Error: c.errMsg, RetryAfter: c.retryAfter, Fault: c.fault,
		Asked: c.asked, Replayed: c.replayed != nil, Uncounted: !c.admitted,
	}
	if !c.firstByte.IsZero() {
		r.TTFBMS = ms(c.firstByte.Sub(c.start))
	}
	if c.status < 400 && c.errClass == "" && !c.complete {
		r.ErrorClass, r.Error = modelcall.ClassDisconnect, "the response ended before it was complete"
		if cause := context.Cause(c.ctx); cause != nil {
			r.Error = cause.Error() + " before the answer was complete"
		}
	}
	if c.usageSeen || c.usage != (modelcall.Usage{}) { // a stream's usage is read event by event
		cost, cached, source := Cost(c.usage, st.price)
		r.InputTokens, r.CachedTokens, r.OutputTokens, r.CostUSD, r.CachedSource = c.usage.Input, cached, c.usage.Output, cost, source
		r.ReasoningTokens = c.usage.Reasoning
	}
	if r.ErrorClass == modelcall.ClassBudgetExhausted {
		r.Status = http.StatusTooManyRequests
	}
	st.settle(r)
	st.endOfAnswer(c)
	if st.replay != nil {
		st.trial.mu.Lock()
		st.countReplay(c, r.CostUSD)
		st.trial.mu.Unlock()
	}
	if st.spec.Conversation != nil {
		st.trial.mu.Lock()
		st.recordConversation(c)
		st.trial.mu.Unlock()
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// errStreamCut ends a stream cut by a fault.
var errStreamCut = errors.New("stream cut by an injected fault")

// meter passes a response body through while reading its usage, and
// settles the call before the client can see that the response is
// complete, so a spent budget is known before the agent's next call. A
// server-sent event stream is re-framed so that each Read returns exactly one
// event, which the proxy then writes and flushes on its own; a plain body is
// read whole first (it is small), priced, then served.
type meter struct {
	resp    *http.Response
	body    io.ReadCloser
	br      *bufio.Reader
	c       *call
	sse     bool
	scrub   *secret.Scrubber
	settle  func()
	pending []byte
	events  int
	rest    bool // a plain body larger than maxCapture: the rest passes through
}

const maxCapture = 16 << 20

func (m *meter) Read(p []byte) (int, error) {
	if !m.sse {
		return m.readPlain(p)
	}
	if len(m.pending) == 0 {
		if m.c.cutAfter > 0 && m.events >= m.c.cutAfter {
			m.c.errClass, m.c.errMsg = modelcall.ClassDisconnect, errStreamCut.Error()
			return 0, errStreamCut
		}
		event, err := m.readEvent()
		if len(event) == 0 {
			if errors.Is(err, io.EOF) && !m.c.complete && m.c.usage != (modelcall.Usage{}) {
				// Some OpenAI-compatible servers end with the usage event
				// and no [DONE]: that is complete too.
				m.c.complete = true
				m.settle()
			}
			return 0, err
		}
		m.events++
		event = m.scrub.Scrub(event)
		m.c.keepAnswer(event)
		done, errMsg := modelcall.InspectEvent(m.c.api, event, &m.c.usage)
		if errMsg != "" {
			m.c.errMsg = errMsg
			if m.c.errClass == "" {
				m.c.errClass = classifyStreamError(errMsg)
			}
		}
		if done && !m.c.complete {
			m.c.complete = true
			m.settle()
		}
		m.pending = event
	}
	n := copy(p, m.pending)
	m.pending = m.pending[n:]
	return n, nil
}

func (m *meter) readPlain(p []byte) (int, error) {
	if len(m.pending) > 0 {
		n := copy(p, m.pending)
		m.pending = m.pending[n:]
		return n, nil
	}
	if !m.rest {
		return 0, io.EOF
	}
	n, err := m.br.Read(p)
	if err == io.EOF {
		m.c.complete = true
	}
	return n, err
}

// readEvent reads lines up to and including the blank line that ends an
// event.
func (m *meter) readEvent() ([]byte, error) {
	var ev []byte
	for {
		line, err := m.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			ev = append(ev, line...)
			continue
		}
		ev = append(ev, line...)
		if err != nil {
			return ev, err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return ev, nil
		}
	}
}

// Close ends the body. A stream the proxy stopped passing on (its agent
// hung up) is read on until the usage the provider reports at its end, for
// the tokens are billed either way: until the call's context ends, at most
// DrainGrace after the hang-up (see call.end).
func (m *meter) Close() error {
	if m.sse && !m.c.complete && m.c.errClass == "" && m.br != nil {
		for {
			event, err := m.readEvent()
			if len(event) > 0 {
				if done, _ := modelcall.InspectEvent(m.c.api, event, &m.c.usage); done {
					break
				}
			}
			if err != nil {
				break
			}
		}
		m.c.errClass, m.c.errMsg = modelcall.ClassDisconnect, "the agent hung up before the answer was complete"
		if cause := context.Cause(m.c.ctx); cause != nil {
			m.c.errMsg = cause.Error() + " before the answer was complete"
		}
	}
	if m.br != nil {
		m.br.Reset(nil)
		readers.Put(m.br)
		m.br = nil
	}
	err := m.body.Close()
	m.resp.Trailer = nil // the proxy would pass them on unannounced
	return err
}

// Buffers are reused across calls: two 32 KiB buffers per response would
// otherwise be most of the gateway's garbage.
var (
	readers     = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}
	copyBuffers = &bufferPool{}
)

// bufferPool is httputil.BufferPool over a sync.Pool.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v := b.p.Get(); v != nil {
		return *v.(*[]byte)
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// classifyStreamError maps an error event inside a stream to a class.
func classifyStreamError(msg string) string {
	switch {
	case strings.Contains(msg, "overloaded"):
		return modelcall.ClassOverloaded
	case strings.Contains(msg, "rate_limit"):
		return modelcall.ClassRateLimit
	}
	return modelcall.ClassUpstream5xx
}
