package llm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/modelcall"
)

// The proxy's hooks, in httputil.ReverseProxy's shape: rewrite (Rewrite),
// route (its Transport), meterResponse (ModifyResponse) and proxyError
// (ErrorHandler).

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
	return g.upstream(r, c)
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
