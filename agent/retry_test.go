package agent

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// roundTrip answers the client's calls in memory, one answer per call.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRetriesWaitAsTold: a model call refused for a while is retried after
// the Retry-After the gateway gave, else after 1, 2, 4… seconds; a wait
// that would pass the deadline is not taken; six attempts at most. The
// waits are the client's own timers, run in a synctest bubble: each check
// is to the nanosecond, and the test takes no time.
func TestRetriesWaitAsTold(t *testing.T) {
	const ok = `{"choices":[{"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`
	tests := []struct {
		name     string
		statuses []int    // the answers, in order; 200 ends
		after    []string // their Retry-After headers
		deadline time.Duration
		// at are the times of the calls since the first; fails says the
		// call fails, with this in its error.
		at    []time.Duration
		fails string
	}{
		{name: "Retry-After, then backoff", statuses: []int{429, 503, 500, 200}, after: []string{"3", "", ""},
			at: []time.Duration{0, 3 * time.Second, 5 * time.Second, 9 * time.Second}},
		{name: "every attempt refused", statuses: []int{500, 500, 500, 500, 500, 500, 200},
			at:    []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second, 31 * time.Second},
			fails: "500"},
		{name: "no time left to wait", statuses: []int{429, 200}, after: []string{"30"}, deadline: 10 * time.Second,
			at: []time.Duration{0}, fails: "no time left to retry"},
		{name: "a long Retry-After is capped at a minute", statuses: []int{429, 200}, after: []string{"600"},
			at: []time.Duration{0, time.Minute}},
		{name: "not retryable", statuses: []int{400, 200}, at: []time.Duration{0}, fails: "400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var at []time.Duration
				rt := roundTrip(func(r *http.Request) (*http.Response, error) {
					i := len(at)
					at = append(at, time.Since(start))
					h := http.Header{}
					if i < len(tt.after) && tt.after[i] != "" {
						h.Set("Retry-After", tt.after[i])
					}
					body := `{"error":{"message":"try later","type":"rate_limit"}}`
					if tt.statuses[i] == http.StatusOK {
						body = ok
					}
					return &http.Response{StatusCode: tt.statuses[i], Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
				})
				c := &llmClient{base: "http://gateway.invalid/v1", model: "m", http: &http.Client{Transport: rt}}
				ctx := t.Context()
				if tt.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				resp, err := c.chat(ctx, []message{{Role: "user", Content: text("hi")}}, nil)
				switch {
				case tt.fails == "" && (err != nil || resp == nil):
					t.Fatalf("the call failed: %v", err)
				case tt.fails != "" && (err == nil || !strings.Contains(err.Error(), tt.fails)):
					t.Fatalf("got %v, want an error with %q", err, tt.fails)
				}
				if len(at) != len(tt.at) {
					t.Fatalf("calls at %v, want %v", at, tt.at)
				}
				for i := range at {
					if at[i] != tt.at[i] {
						t.Fatalf("calls at %v, want %v", at, tt.at)
					}
				}
			})
		})
	}
}
