//go:build !nosdk

package llm

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/troupebench/troupe/modelcall"
)

// TestGatewayRetriesOnTheAgentsBehalf: a 429 (waiting as retry-after-ms
// asks) and a 503 (backing off) are retried by the gateway, so the
// agent's SDK, which retries nothing itself here, sees one successful
// call, charged once, its record counting the retries and their wait; an
// upstream that asks for more than a minute, and a 400, reach the agent
// at once; a closed port is retried within the budget, then answered 502
// and reported unanswerable.
func TestGatewayRetriesOnTheAgentsBehalf(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "r-1", Endpoint: "oar"}, AgentSpec{ID: "d-1", Endpoint: "down"})
	var n atomic.Int32
	fail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.Header().Set("Retry-After-Ms", "60")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit"}}`))
		default:
			f.up.custom.Store(nil) // the next answer is the upstream's own
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"message":"overloaded","type":"overloaded"}}`))
		}
	})
	f.up.custom.Store(&fail)
	before := f.up.calls.Load()
	resp, err := f.openai("r-1").Chat.Completions.New(t.Context(), chatParams)
	if err != nil || len(resp.Choices) == 0 {
		t.Fatalf("the agent saw %v", err)
	}
	if got := f.up.calls.Load() - before; got != 3 {
		t.Errorf("the upstream was asked %d times, want 3", got)
	}
	recs := f.records(t, "r-1")
	if len(recs) != 1 {
		t.Fatalf("%d records, want one call: %+v", len(recs), recs)
	}
	if r := recs[0]; r.Status != 200 || r.Retries != 2 || r.RetryWaitMS < 60 || r.CostUSD != wantCost || r.ErrorClass != "" {
		t.Errorf("record %+v", r)
	}

	for _, c := range []struct {
		name, header, value string
		status              int
	}{
		{"a wait over a minute", "Retry-After", "120", http.StatusTooManyRequests},
		{"a bad request", "", "", http.StatusBadRequest},
		{"told not to", "X-Should-Retry", "false", http.StatusServiceUnavailable},
	} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.header != "" {
				w.Header().Set(c.header, c.value)
			}
			w.WriteHeader(c.status)
			w.Write([]byte(`{"error":{"message":"no","type":"x"}}`))
		})
		f.up.custom.Store(&h)
		before := f.up.calls.Load()
		_, err := f.openai("r-1").Chat.Completions.New(t.Context(), chatParams)
		if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != c.status || f.up.calls.Load()-before != 1 {
			t.Errorf("%s: %v after %d upstream calls", c.name, err, f.up.calls.Load()-before)
		}
	}
	f.up.custom.Store(nil)

	_, err = f.openai("d-1").Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != http.StatusBadGateway {
		t.Fatalf("a closed port: %v", err)
	}
	if r := f.records(t, "d-1")[0]; r.Retries != DefaultRetries || r.ErrorClass != modelcall.ClassUnreachable {
		t.Errorf("record %+v", r)
	}
	select {
	case u := <-f.trial.Unanswerable():
		if u.Agent != "d-1" || u.Endpoint != "down" || u.Class != modelcall.ClassUnreachable || !strings.Contains(u.Reason, "base_url") {
			t.Errorf("%+v", u)
		}
	default:
		t.Error("the closed port was not reported unanswerable")
	}
}
