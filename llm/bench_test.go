package llm

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

// benchUpstream answers chat completions instantly: a small JSON answer, or
// a stream of ten events; and a Responses call with a small JSON answer.
func benchUpstream(b *testing.B) *httptest.Server {
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":0}}}`
	response := `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":12}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !strings.Contains(r.Header.Get("Accept"), "event-stream") {
			w.Header().Set("Content-Type", "application/json")
			if strings.HasSuffix(r.URL.Path, "/responses") {
				io.WriteString(w, response)
				return
			}
			io.WriteString(w, answer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 10 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%d\"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":10}}\n\ndata: [DONE]\n\n")
	}))
	b.Cleanup(srv.Close)
	return srv
}

// benchTargets returns, for each variant, the URL and token of an OpenAI
// route (path, under /v1): the upstream itself, or the gateway in front of it.
func benchTargets(b *testing.B, path string) map[string][2]string {
	up := benchUpstream(b)
	g := New(Endpoints{"oa": {Name: "oa", API: modelcall.OpenAI, BaseURL: up.URL + "/v1", APIKeyEnv: "K", Model: "m"}})
	g.Getenv = func(string) string { return "sk-bench" }
	if err := g.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close(context.Background()) })
	trial, err := g.OpenTrial(TrialSpec{ID: "t", Agents: []AgentSpec{{ID: "a-1", Endpoint: "oa", Log: io.Discard}, {ID: "a-2", Endpoint: "oa", Log: io.Discard, Conversation: io.Discard}},
		Prices: map[string]manifest.Price{"oa": testPrice}})
	if err != nil {
		b.Fatal(err)
	}
	return map[string][2]string{
		"baseline": {up.URL + "/v1" + path, "sk-bench"},
		"gateway":  {g.URL() + "/v1" + path, trial.Token("a-1").Reveal()},
		// recorded: the gateway keeping each call whole too.
		"recorded": {g.URL() + "/v1" + path, trial.Token("a-2").Reveal()},
	}
}
