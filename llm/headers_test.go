package llm

import (
	"net/http"
	"strings"
	"testing"
)

// agentMaySee is what the test allows in a response: the headers the APIs
// define, and the Date the gateway's own server adds.
func agentMaySee(key string) bool {
	switch key {
	case "Content-Type", "Content-Length", "Content-Encoding", "Date", "X-Request-Id", "Request-Id", "Retry-After", "Retry-After-Ms", "X-Should-Retry":
		return true
	}
	return strings.HasPrefix(key, "X-Ratelimit-") || strings.HasPrefix(key, "Anthropic-Ratelimit-")
}

func checkHeaders(t *testing.T, header, trailer http.Header) {
	t.Helper()
	for k, vs := range header {
		if !agentMaySee(k) {
			t.Errorf("header %s: %q reached the agent", k, vs)
		}
		if strings.Contains(strings.Join(vs, " "), realKey) {
			t.Errorf("header %s carries the real key", k)
		}
	}
	for k, vs := range trailer {
		t.Errorf("trailer %s: %q reached the agent", k, vs)
	}
}
