package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

// realKey stands for a provider key: it must reach the upstream and nowhere
// else.
const realKey = "sk-REAL-upstream-key-0123456789abcdef-must-never-leak"

// upstream is a local model server speaking both wire formats. It checks the
// gateway forwarded the real key and the endpoint's model, and answers with
// fixed usage: 1,000 input tokens of which 400 cached, 200 output.
type upstream struct {
	t   *testing.T
	srv *httptest.Server
	// status, when set, is the next answer's status (with Retry-After 7).
	status     atomic.Int32
	omitCached atomic.Bool
	calls      atomic.Int32
	mu         sync.Mutex
	lastModel  string
	lastBody   map[string]any
	// custom, when set, answers instead, after the key check.
	custom atomic.Pointer[http.HandlerFunc]
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{t: t}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	anthropicAPI := strings.HasPrefix(r.URL.Path, "/v1/messages")
	if (anthropicAPI && r.Header.Get("X-Api-Key") != realKey) || (!anthropicAPI && r.Header.Get("Authorization") != "Bearer "+realKey) {
		http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
		return
	}
	if anthropicAPI && r.Header.Get("anthropic-version") == "" {
		http.Error(w, `{"error":{"message":"no anthropic-version"}}`, http.StatusBadRequest)
		return
	}
	if h := u.custom.Load(); h != nil {
		(*h)(w, r)
		return
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	u.mu.Lock()
	u.lastModel, _ = body["model"].(string)
	u.lastBody = body
	u.mu.Unlock()
	if s := u.status.Swap(0); s != 0 {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(int(s))
		fmt.Fprintf(w, `{"error":{"message":"upstream says %d","type":"upstream"}}`, s)
		return
	}
	switch r.URL.Path {
	case "/v1/responses":
		u.serveResponses(w, body)
		return
	case "/v1/messages/count_tokens":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":4242}`)
		return
	}
	stream, _ := body["stream"].(bool)
	w.Header().Set("Content-Type", "application/json")
	cached := map[string]any{"cached_tokens": 400}
	if u.omitCached.Load() {
		cached = nil
	}
	switch {
	case anthropicAPI && !stream:
		usage := map[string]any{"input_tokens": 600, "output_tokens": 200, "cache_read_input_tokens": 400}
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": u.lastModel,
			"content": []any{map[string]any{"type": "text", "text": "hello from upstream"}}, "stop_reason": "end_turn", "usage": usage})
	case anthropicAPI:
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":600,"cache_read_input_tokens":400,"output_tokens":1}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello "}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"from upstream"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":200}}`,
			`{"type":"message_stop"}`,
		} {
			var typ struct{ Type string }
			json.Unmarshal([]byte(ev), &typ)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ.Type, ev)
			w.(http.Flusher).Flush()
		}
	case !stream:
		usage := map[string]any{"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}
		if cached != nil {
			usage["prompt_tokens_details"] = cached
		}
		json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "created": 1, "model": u.lastModel,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "hello from upstream"}, "finish_reason": "stop"}}, "usage": usage})
	default:
		opts, _ := body["stream_options"].(map[string]any)
		if opts["include_usage"] != true {
			http.Error(w, `{"error":{"message":"stream_options.include_usage missing"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		usage := map[string]any{"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}
		if cached != nil {
			usage["prompt_tokens_details"] = cached
		}
		usageJSON, _ := json.Marshal(usage)
		for _, ch := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hello "},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"from upstream"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":` + string(usageJSON) + `}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", ch)
			w.(http.Flusher).Flush()
		}
	}
}

func (u *upstream) model() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lastModel
}

// fixture is a gateway in front of the upstream and a mock, with one trial.
type fixture struct {
	g      *Gateway
	up     *upstream
	trial  *Trial
	logs   string // folder of per-agent llm-calls.jsonl
	logBuf *syncbuf.Buffer
}

var testPrice = manifest.Price{InputPerMillionUSD: 2, CachedInputPerMillionUSD: 0.5, OutputPerMillionUSD: 10}

// wantCost is the cost of the upstream's fixed usage at testPrice:
// (600 × 2 + 400 × 0.5 + 200 × 10) / 1e6.
const wantCost = 0.0034

const testScenario = `description: "scripted answers for the gateway tests"
scripts:
  lead:
    - match: {contains: "hello.txt"}
      tool_calls:
        - name: send_message
          arguments:
            content: "@{{(.Role \"implementer\").ID}} write it, channel {{.Channel}}"
            mentions: ["{{(.Role \"implementer\").ID}}"]
            pubkey: "{{(.Agent \"worker-1\").Pubkey}}"
      usage: {input_tokens: 1000, output_tokens: 200, cached_tokens: 400}
    - reply: "delegated to {{(.Role \"implementer\").ID}}"
      chunks: 3
    - error: {status: 429, retry_after_s: 2, times: 1}
      reply: "after one 429"
  implementer:
    - match: {role: tool, contains: "exit 0"}
      reply: "never reached without a tool result"
  echo:
    - tool_calls:
        - name: send_message
          arguments: {content: "I read: {{.Last}}"}
  streamy:
    - reply: "a stream that is cut"
      chunks: 5
      cut_after_chunks: 3
`

// closedURL is the URL of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

func newFixture(t *testing.T, agents ...AgentSpec) *fixture {
	t.Helper()
	up := newUpstream(t)
	f := &fixture{up: up, logs: t.TempDir(), logBuf: &syncbuf.Buffer{}}
	// oa and an pass every upstream failure to the agent (retries: 0), as
	// the tests of what agents see want; oar retries as endpoints do by
	// default, and down is a closed port.
	noRetries := 0
	f.g = New(Endpoints{
		"oa":   {Name: "oa", API: modelcall.OpenAI, BaseURL: up.srv.URL + "/v1", APIKeyEnv: "TEST_OA_KEY", Model: "upstream-model-o", Retries: &noRetries},
		"an":   {Name: "an", API: modelcall.Anthropic, BaseURL: up.srv.URL, APIKeyEnv: "TEST_AN_KEY", Model: "upstream-model-a", Retries: &noRetries},
		"oar":  {Name: "oar", API: modelcall.OpenAI, BaseURL: up.srv.URL + "/v1", APIKeyEnv: "TEST_OA_KEY", Model: "upstream-model-o"},
		"down": {Name: "down", API: modelcall.OpenAI, BaseURL: closedURL(t) + "/v1", APIKeyEnv: "TEST_OA_KEY", Model: "m"},
	})
	f.g.RetryBase = 10 * time.Millisecond
	f.g.Getenv = func(k string) string { return map[string]string{"TEST_OA_KEY": realKey, "TEST_AN_KEY": realKey}[k] }
	f.g.Scenarios = fstest.MapFS{"script.yaml": {Data: []byte(testScenario)}, "stuck.yaml": {Data: []byte(stuckScenario)}, "responses.yaml": {Data: []byte(responsesScenario)}, "sidecalls.yaml": {Data: []byte(sideCallScenario)}}
	f.g.Logger = slog.New(slog.NewTextHandler(f.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := f.g.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.g.Close(ctx); err != nil {
			t.Errorf("close gateway: %v", err)
		}
	})
	for i := range agents {
		file, err := os.Create(filepath.Join(f.logs, agents[i].ID+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { file.Close() })
		agents[i].Log = file
	}
	prices := map[string]manifest.Price{"oa": testPrice, "an": testPrice, "oar": testPrice, "down": testPrice, "mock/script": testPrice, "mock/stuck": testPrice, "mock/responses": testPrice, "mock/sidecalls": testPrice}
	trial, err := f.g.OpenTrial(TrialSpec{ID: "t1", Channel: "chan-1", UserPubkey: "uu", Agents: agents, Prices: prices})
	if err != nil {
		t.Fatal(err)
	}
	f.trial = trial
	t.Cleanup(func() {
		if err := trial.Close(context.Background()); err != nil {
			t.Errorf("close trial: %v", err)
		}
	})
	return f
}

// records reads an agent's call log.
func (f *fixture) records(t *testing.T, agent string) []modelcall.Record {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.logs, agent+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []modelcall.Record
	for line := range bytes.Lines(data) {
		var r modelcall.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// waitRecords waits for a call the client abandoned to be recorded.
func waitRecords(t *testing.T, f *fixture, agent string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(f.records(t, agent)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d records, want %d", agent, len(f.records(t, agent)), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOpenErrors(t *testing.T) {
	g := New(Endpoints{"oa": {Name: "oa", API: modelcall.OpenAI, BaseURL: "http://x", APIKeyEnv: "TROUPE_TEST_MISSING_KEY"}})
	g.Getenv = func(string) string { return "" }
	err := g.Open(t.Context())
	if err == nil || !strings.Contains(err.Error(), "environment variable TROUPE_TEST_MISSING_KEY is not set") {
		t.Errorf("missing key: %v", err)
	}
	g2 := New(Endpoints{})
	if err := g2.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer g2.Close(context.Background())
	_, err = g2.OpenTrial(TrialSpec{ID: "t", Agents: []AgentSpec{{ID: "a-1", Endpoint: "gpt-x"}, {ID: "b-1", Endpoint: "mock/none"}}, Prices: map[string]manifest.Price{"mock/none": {}}})
	if err == nil || !strings.Contains(err.Error(), `endpoint "gpt-x" is not configured`) || !strings.Contains(err.Error(), `mock scenario "none" not found`) {
		t.Errorf("bad trial: %v", err)
	}
}

// TestStreamEventsAreFlushedOneByOne checks that the gateway does not buffer
// a stream: each event reaches the client while the upstream is still
// holding the next.
func TestStreamEventsAreFlushedOneByOne(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"first\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	g := New(Endpoints{"oa": {Name: "oa", API: modelcall.OpenAI, BaseURL: up.URL, Model: "m"}})
	if err := g.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer g.Close(context.Background())
	// The stream ends before the gateway closes, which would otherwise read
	// on for its usage for DrainGrace.
	defer close(release)
	trial, _ := g.OpenTrial(TrialSpec{ID: "t", Agents: []AgentSpec{{ID: "a-1", Endpoint: "oa"}}, Prices: map[string]manifest.Price{"oa": {}}})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", g.URL()+"/v1/chat/completions", strings.NewReader(`{"model":"x","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+trial.Token("a-1").Reveal())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if !strings.Contains(line, "first") {
			t.Errorf("first line %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event was held back until the stream ended")
	}
}
