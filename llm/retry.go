package llm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// The gateway retries on the agents' behalf what a provider's bad minute
// makes of a call — a 429, a 5xx or 529 "overloaded", a connection that
// failed before an answer — so the agent sees one slow call rather than an
// error its team may flounder on. A retry waits as the upstream asks
// (Retry-After, retry-after-ms) or backs off exponentially with jitter.
// A streamed answer cut once it has begun is never replayed (the agent
// would see its output twice): only what failed before the answer's first
// byte is retried.

// maxRetryWait is the longest the gateway waits before one retry: an
// upstream that asks for more is answered as it is, and the agent decides.
const maxRetryWait = 60 * time.Second

// upstream sends a call to its endpoint's upstream, retrying within the
// endpoint's budget.
func (g *Gateway) upstream(r *http.Request, c *call) (*http.Response, error) {
	budget := c.st.endpoint.retries()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			r.Body = io.NopCloser(bytes.NewReader(c.body))
			r.ContentLength = int64(len(c.body))
		}
		resp, err := g.Transport.RoundTrip(r)
		wait, again := g.retryWait(resp, err, attempt)
		if !again || attempt >= budget || r.Context().Err() != nil {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		g.Logger.Info("upstream call retried", "trial", c.st.trial.spec.ID, "agent", c.st.spec.ID, "endpoint", c.st.endpoint.Name,
			"attempt", attempt+1, "status", statusOf(resp), "wait", wait.String())
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			return nil, r.Context().Err()
		}
		c.retries++
		c.retryWait += wait
	}
}

// retryWait says whether an upstream's answer (or failure) is retried, and
// after how long.
func (g *Gateway) retryWait(resp *http.Response, err error, attempt int) (time.Duration, bool) {
	if err != nil {
		// The transport fails before any answer: a refused or reset
		// connection, a name that does not resolve. A timeout waiting for
		// headers is not retried: it has taken long enough.
		if isTimeout(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return 0, false
		}
		return g.backoff(attempt), true
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, 529:
	default:
		return 0, false
	}
	if resp.Header.Get("X-Should-Retry") == "false" {
		return 0, false
	}
	if d, ok := askedWait(resp.Header); ok {
		if d > maxRetryWait {
			return 0, false
		}
		return d, true
	}
	return g.backoff(attempt), true
}

// askedWait is the wait an upstream asks for: retry-after-ms, else
// Retry-After in seconds or as a date.
func askedWait(h http.Header) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// backoff is the wait before retry attempt+1: RetryBase doubled each time,
// at most 20 s, with full jitter.
func (g *Gateway) backoff(attempt int) time.Duration {
	base := g.RetryBase
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	d := min(base<<min(attempt, 10), 20*time.Second)
	return d/2 + rand.N(d/2+1)
}

func statusOf(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}
