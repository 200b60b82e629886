//go:build !nosdk

package llm

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"
)

// TestOnlyAPIHeadersReachTheAgent: an upstream's answer reaches the agent
// with the headers the APIs define, their values scrubbed of the real key,
// and nothing else: no header or trailer echoing the key, no cookie, no
// vendor header.
func TestOnlyAPIHeadersReachTheAgent(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"}, AgentSpec{ID: "b-1", Endpoint: "an"})
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Debug-Upstream-Auth", r.Header.Get("Authorization")+r.Header.Get("X-Api-Key")) // the real key
		h.Set("Set-Cookie", "session=s3cr3t; Path=/")
		h.Set("Openai-Organization", "org-of-the-host")
		h.Set("Anthropic-Organization-Id", "org-of-the-host")
		h.Set("X-Vendor-Trace", "trace-1")
		h.Set("X-Request-Id", "req_1")
		h.Set("Request-Id", "req_"+realKey) // passes, scrubbed
		h.Set("X-Ratelimit-Remaining-Requests", "99")
		h.Set("Anthropic-Ratelimit-Tokens-Remaining", "5000")
		h.Set("Retry-After-Ms", "250")
		h.Set("X-Should-Retry", "false")
		h.Set("Trailer", "X-Debug-Trailer")
		if strings.Contains(r.Header.Get("Accept"), "event-stream") {
			h.Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n")
			io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n")
			io.WriteString(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\ndata: [DONE]\n\n")
		} else if r.Header.Get("X-Test-Status") == "429" {
			h.Set("Retry-After", "1")
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit_error"}}`)
		} else {
			answer(w)
		}
		h.Set("X-Debug-Trailer", realKey)
	})
	for _, tc := range []struct {
		name   string
		agent  string
		path   string
		stream bool
		status int
	}{
		{"openai", "a-1", "/v1/chat/completions", false, 200},
		{"openai stream", "a-1", "/v1/chat/completions", true, 200},
		{"anthropic", "b-1", "/v1/messages", false, 200},
		{"anthropic stream", "b-1", "/v1/messages", true, 200},
		{"openai 429", "a-1", "/v1/chat/completions", false, 429},
		{"responses", "a-1", "/v1/responses", false, 200},
		{"responses stream", "a-1", "/v1/responses", true, 200},
		{"responses 429", "a-1", "/v1/responses", false, 429},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"model":"x","stream":%t,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, tc.stream)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.g.URL()+tc.path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+f.trial.Token(tc.agent).Reveal())
			if tc.stream {
				req.Header.Set("Accept", "text/event-stream")
			}
			if tc.status == 429 {
				req.Header.Set("X-Test-Status", "429")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tc.status {
				t.Fatalf("status %d, %v: %s", resp.StatusCode, err, data)
			}
			checkHeaders(t, resp.Header, resp.Trailer)
			for _, want := range []string{"X-Request-Id", "Request-Id", "X-Ratelimit-Remaining-Requests", "Anthropic-Ratelimit-Tokens-Remaining", "Retry-After-Ms", "X-Should-Retry"} {
				if resp.Header.Get(want) == "" {
					t.Errorf("%s did not pass", want)
				}
			}
			if got := resp.Header.Get("Request-Id"); !strings.HasPrefix(got, "req_[") {
				t.Errorf("Request-Id %q, want the key in it redacted", got)
			}
			if tc.status == 429 && resp.Header.Get("Retry-After") != "1" {
				t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
			}
			if strings.Contains(string(data), realKey) {
				t.Errorf("the body holds the key: %s", data)
			}
		})
	}
	// The SDK reads the answer as usual, and sees the same headers.
	var raw *http.Response
	resp, err := f.openai("a-1").Chat.Completions.New(t.Context(), chatParams, option.WithResponseInto(&raw))
	if err != nil || resp.Choices[0].Message.Content != "hi" {
		t.Fatalf("SDK: %v", err)
	}
	checkHeaders(t, raw.Header, raw.Trailer)
	if raw.Header.Get("X-Request-Id") != "req_1" {
		t.Errorf("the SDK did not get the request id: %v", raw.Header)
	}
}
