package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
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

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/troupebench/troupe/manifest"
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
	logBuf *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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

func newFixture(t *testing.T, agents ...AgentSpec) *fixture {
	t.Helper()
	up := newUpstream(t)
	f := &fixture{up: up, logs: t.TempDir(), logBuf: &syncBuffer{}}
	f.g = New(Endpoints{
		"oa": {Name: "oa", API: OpenAI, BaseURL: up.srv.URL + "/v1", APIKeyEnv: "TEST_OA_KEY", Model: "upstream-model-o"},
		"an": {Name: "an", API: Anthropic, BaseURL: up.srv.URL, APIKeyEnv: "TEST_AN_KEY", Model: "upstream-model-a"},
	})
	f.g.Getenv = func(k string) string { return map[string]string{"TEST_OA_KEY": realKey, "TEST_AN_KEY": realKey}[k] }
	f.g.Scenarios = fstest.MapFS{"script.yaml": {Data: []byte(testScenario)}, "stuck.yaml": {Data: []byte(stuckScenario)}, "responses.yaml": {Data: []byte(responsesScenario)}}
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
	prices := map[string]manifest.Price{"oa": testPrice, "an": testPrice, "mock/script": testPrice, "mock/stuck": testPrice, "mock/responses": testPrice}
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

func (f *fixture) openai(agent string) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(f.g.URL()+"/v1/"), option.WithAPIKey(f.trial.Token(agent).Reveal()), option.WithMaxRetries(0))
	return &c
}

func (f *fixture) anthropic(agent string) *anthropic.Client {
	c := anthropic.NewClient(aoption.WithBaseURL(f.g.URL()+"/"), aoption.WithAPIKey(f.trial.Token(agent).Reveal()), aoption.WithMaxRetries(0))
	return &c
}

// records reads an agent's call log.
func (f *fixture) records(t *testing.T, agent string) []Record {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.logs, agent+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	for line := range bytes.Lines(data) {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

var chatParams = openai.ChatCompletionNewParams{
	Model:    "gpt-something-the-agent-wants",
	Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Create /app/hello.txt")},
}

var messageParams = anthropic.MessageNewParams{
	Model:     "claude-the-agent-wants",
	MaxTokens: 100,
	Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Create /app/hello.txt"))},
}

func TestOpenAIThroughGateway(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	client := f.openai("a-1")
	resp, err := client.Chat.Completions.New(t.Context(), chatParams)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "hello from upstream" || resp.Usage.PromptTokensDetails.CachedTokens != 400 {
		t.Errorf("response %+v", resp)
	}
	if f.up.model() != "upstream-model-o" {
		t.Errorf("upstream saw model %q; the agent must not pick its model", f.up.model())
	}

	stream := client.Chat.Completions.NewStreaming(t.Context(), chatParams)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "hello from upstream" || acc.Usage.PromptTokens != 1000 {
		t.Errorf("stream gave %q, usage %+v", acc.Choices[0].Message.Content, acc.Usage)
	}

	recs := f.records(t, "a-1")
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if r.Status != 200 || r.InputTokens != 1000 || r.CachedTokens != 400 || r.OutputTokens != 200 ||
			r.CachedSource != CachedReported || math.Abs(r.CostUSD-wantCost) > 1e-12 || r.ErrorClass != "" ||
			r.Model != "upstream-model-o" || r.Stream != (i == 1) || r.TTFBMS <= 0 || r.LatencyMS < r.TTFBMS {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	per, total := f.trial.Usage()
	if per["a-1"].Calls != 2 || total.InputTokens != 2000 || math.Abs(total.CostUSD-2*wantCost) > 1e-12 {
		t.Errorf("totals %+v %+v", per, total)
	}
}

func TestAnthropicThroughGateway(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "an"})
	client := f.anthropic("a-1")
	msg, err := client.Messages.New(t.Context(), messageParams)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "hello from upstream" || f.up.model() != "upstream-model-a" {
		t.Errorf("message %+v, upstream model %q", msg, f.up.model())
	}
	stream := client.Messages.NewStreaming(t.Context(), messageParams)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Content[0].Text != "hello from upstream" || acc.Usage.OutputTokens != 200 {
		t.Errorf("stream gave %+v", acc)
	}
	for i, r := range f.records(t, "a-1") {
		if r.Status != 200 || r.InputTokens != 1000 || r.CachedTokens != 400 || r.OutputTokens != 200 || math.Abs(r.CostUSD-wantCost) > 1e-12 || r.API != Anthropic {
			t.Errorf("record %d: %+v", i, r)
		}
	}
}

func TestCachedFallbackToCacheReadRate(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	f.up.omitCached.Store(true)
	f.trial.agents["a-1"].price.CacheReadRate = 0.25
	if _, err := f.openai("a-1").Chat.Completions.New(t.Context(), chatParams); err != nil {
		t.Fatal(err)
	}
	r := f.records(t, "a-1")[0]
	// 1000 × 0.25 = 250 estimated cached: (750 × 2 + 250 × 0.5 + 200 × 10) / 1e6
	if r.CachedSource != CachedEstimated || r.CachedTokens != 250 || math.Abs(r.CostUSD-0.003625) > 1e-12 {
		t.Errorf("record %+v", r)
	}
}

func TestUnknownAndRevokedTokens(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"}, AgentSpec{ID: "b-1", Endpoint: "an"})
	bad := openai.NewClient(option.WithBaseURL(f.g.URL()+"/v1/"), option.WithAPIKey("tg-not-a-token"), option.WithMaxRetries(0))
	_, err := bad.Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != 401 || !strings.Contains(oerr.Message, "unknown or revoked") {
		t.Errorf("unknown token (OpenAI): %v", err)
	}
	badA := anthropic.NewClient(aoption.WithBaseURL(f.g.URL()+"/"), aoption.WithAPIKey("nope"), aoption.WithMaxRetries(0))
	_, err = badA.Messages.New(t.Context(), messageParams)
	if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || aerr.StatusCode != 401 || !strings.Contains(aerr.RawJSON(), `"type":"authentication_error"`) {
		t.Errorf("unknown token (Anthropic): %v", err)
	}
	// A token of an OpenAI endpoint used on the Anthropic route is refused.
	cross := anthropic.NewClient(aoption.WithBaseURL(f.g.URL()+"/"), aoption.WithAPIKey(f.trial.Token("a-1").Reveal()), aoption.WithMaxRetries(0))
	_, err = cross.Messages.New(t.Context(), messageParams)
	if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || aerr.StatusCode != 400 || !strings.Contains(aerr.RawJSON(), "call /v1/chat/completions") {
		t.Errorf("wrong API: %v", err)
	}
	client := f.openai("a-1")
	f.trial.Close(t.Context())
	_, err = client.Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != 401 {
		t.Errorf("revoked token: %v", err)
	}
	if f.up.calls.Load() != 0 {
		t.Errorf("%d refused calls reached the upstream", f.up.calls.Load())
	}
}

func TestBudgets(t *testing.T) {
	two, tokens := int64(2), int64(300)
	f := newFixture(t,
		AgentSpec{ID: "calls-1", Endpoint: "oa", Budget: manifest.Budget{MaxCalls: &two}},
		AgentSpec{ID: "tokens-1", Endpoint: "an", Budget: manifest.Budget{MaxOutputTokens: &tokens}},
	)
	client := f.openai("calls-1")
	for range 2 {
		if _, err := client.Chat.Completions.New(t.Context(), chatParams); err != nil {
			t.Fatal(err)
		}
	}
	_, err := client.Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != 429 || oerr.Type != "budget_exhausted" || !strings.Contains(oerr.Message, "agent calls-1's max_calls is spent (2 of 2)") {
		t.Fatalf("third call: %v", err)
	}
	if got := f.up.calls.Load(); got != 2 {
		t.Errorf("upstream saw %d calls; a refused call must not be forwarded", got)
	}
	e := <-f.trial.Exhausted()
	if e.Agent != "calls-1" || e.Budget != "max_calls" {
		t.Errorf("exhaustion %+v", e)
	}
	recs := f.records(t, "calls-1")
	if last := recs[len(recs)-1]; last.ErrorClass != ClassBudgetExhausted || last.Status != 429 || last.CostUSD != 0 {
		t.Errorf("refusal record %+v", last)
	}

	// The call that crosses max_output_tokens (200 + 200 > 300) completes;
	// the next is refused, in Anthropic's error shape.
	ac := f.anthropic("tokens-1")
	for range 2 {
		if _, err := ac.Messages.New(t.Context(), messageParams); err != nil {
			t.Fatalf("a call that crosses the budget must complete: %v", err)
		}
	}
	_, err = ac.Messages.New(t.Context(), messageParams)
	if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || aerr.StatusCode != 429 || !strings.Contains(aerr.RawJSON(), `"type":"budget_exhausted"`) || !strings.Contains(aerr.RawJSON(), "max_output_tokens is spent (400 of 300)") {
		t.Fatalf("call after crossing: %v", err)
	}
	if e := <-f.trial.Exhausted(); e.Agent != "tokens-1" || e.Budget != "max_output_tokens" || e.Spent != 400 {
		t.Errorf("exhaustion %+v", e)
	}
}

func TestTrialCostCap(t *testing.T) {
	up := newUpstream(t)
	g := New(Endpoints{"oa": {Name: "oa", API: OpenAI, BaseURL: up.srv.URL + "/v1", APIKeyEnv: "K", Model: "m"}})
	g.Getenv = func(string) string { return realKey }
	if err := g.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	maxCost := 0.005 // two calls at $0.0034 cross it
	trial, err := g.OpenTrial(TrialSpec{ID: "t", Agents: []AgentSpec{{ID: "a-1", Endpoint: "oa"}, {ID: "b-1", Endpoint: "oa"}}, Prices: map[string]manifest.Price{"oa": testPrice}, MaxCostUSD: &maxCost})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"a-1", "b-1"} {
		c := openai.NewClient(option.WithBaseURL(g.URL()+"/v1/"), option.WithAPIKey(trial.Token(a).Reveal()), option.WithMaxRetries(0))
		if _, err := c.Chat.Completions.New(t.Context(), chatParams); err != nil {
			t.Fatal(err)
		}
	}
	// Crossing the cap is not yet the end: the agents have the answers of
	// the calls that crossed it, and may act on them.
	select {
	case e := <-trial.Exhausted():
		t.Fatalf("exhaustion %+v reported before a call was refused", e)
	default:
	}
	c := openai.NewClient(option.WithBaseURL(g.URL()+"/v1/"), option.WithAPIKey(trial.Token("a-1").Reveal()), option.WithMaxRetries(0))
	_, err = c.Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != 429 || !strings.Contains(oerr.Message, "the trial's max_cost_usd") {
		t.Errorf("call after the trial's cap: %v", err)
	}
	if e := <-trial.Exhausted(); e.Agent != "" || e.Budget != "max_cost_usd" || math.Abs(e.Spent-2*wantCost) > 1e-12 {
		t.Errorf("exhaustion %+v", e)
	}
}

func TestUpstreamErrorsPassThrough(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"}, AgentSpec{ID: "b-1", Endpoint: "an"})
	for _, tt := range []struct {
		status int
		class  string
	}{{429, ClassRateLimit}, {503, ClassOverloaded}, {529, ClassOverloaded}, {500, ClassUpstream5xx}, {400, ClassBadRequest}} {
		f.up.status.Store(int32(tt.status))
		_, err := f.openai("a-1").Chat.Completions.New(t.Context(), chatParams)
		if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != tt.status || oerr.Response.Header.Get("Retry-After") != "7" {
			t.Errorf("%d: %v", tt.status, err)
			continue
		}
		recs := f.records(t, "a-1")
		if r := recs[len(recs)-1]; r.Status != tt.status || r.ErrorClass != tt.class || r.RetryAfter != "7" {
			t.Errorf("%d: record %+v", tt.status, r)
		}
	}
	f.up.status.Store(503)
	_, err := f.anthropic("b-1").Messages.New(t.Context(), messageParams)
	if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || aerr.StatusCode != 503 {
		t.Errorf("anthropic 503: %v", err)
	}
}

func TestFaults(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"}, AgentSpec{ID: "b-1", Endpoint: "an"})
	f.g.SetFaults(
		Fault{Agent: "a-1", Status: 429, RetryAfter: 3 * time.Second, Times: 1},
		Fault{Agent: "a-1", CutAfterEvents: 1, Times: 1},
		Fault{Agent: "b-1", Hang: true, Times: 1},
		Fault{Agent: "b-1", Delay: 50 * time.Millisecond, Times: 1},
	)
	_, err := f.openai("a-1").Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != 429 || oerr.Response.Header.Get("Retry-After") != "3" || f.up.calls.Load() != 0 {
		t.Fatalf("status fault: %v", err)
	}
	stream := f.openai("a-1").Chat.Completions.NewStreaming(t.Context(), chatParams)
	chunks := 0
	for stream.Next() {
		chunks++
	}
	if stream.Err() == nil || chunks != 1 {
		t.Errorf("cut stream: %d chunks, err %v", chunks, stream.Err())
	}
	recs := f.records(t, "a-1")
	if r := recs[1]; r.ErrorClass != ClassDisconnect || !strings.Contains(r.Fault, "cut after 1 events") {
		t.Errorf("cut record %+v", r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := f.anthropic("b-1").Messages.New(ctx, messageParams); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang: %v", err)
	}
	start := time.Now()
	if _, err := f.anthropic("b-1").Messages.New(t.Context(), messageParams); err != nil || time.Since(start) < 50*time.Millisecond {
		t.Errorf("delay: %v after %v", err, time.Since(start))
	}
	waitRecords(t, f, "b-1", 2)
	if r := f.records(t, "b-1")[0]; r.ErrorClass != ClassDisconnect || r.Fault != "hang" {
		t.Errorf("hang record %+v", r)
	}
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

func TestMockScenario(t *testing.T) {
	f := newFixture(t,
		AgentSpec{ID: "lead-1", Role: "lead", Kind: "orchestrator", Pubkey: "pk-lead", Endpoint: "mock/script"},
		AgentSpec{ID: "worker-1", Role: "implementer", Kind: "worker", Pubkey: "pk-worker", Endpoint: "mock/script"},
		AgentSpec{ID: "worker-2", Role: "implementer", Kind: "worker", Pubkey: "pk-w2", Endpoint: "mock/script"},
		AgentSpec{ID: "nobody-1", Role: "critic", Kind: "worker", Endpoint: "mock/script"},
	)
	lead := f.openai("lead-1")
	resp, err := lead.Chat.Completions.New(t.Context(), chatParams)
	if err != nil {
		t.Fatal(err)
	}
	call := resp.Choices[0].Message.ToolCalls[0]
	var args map[string]any
	json.Unmarshal([]byte(call.Function.Arguments), &args)
	if call.Function.Name != "send_message" || args["content"] != "@worker-1 write it, channel chan-1" || args["pubkey"] != "pk-worker" || resp.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("tool call %+v", call)
	}
	// The second step streams in three chunks.
	stream := lead.Chat.Completions.NewStreaming(t.Context(), chatParams)
	var acc openai.ChatCompletionAccumulator
	n := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		n++
	}
	if stream.Err() != nil || acc.Choices[0].Message.Content != "delegated to worker-1" || n < 5 {
		t.Errorf("streamed reply %q in %d chunks: %v", acc.Choices[0].Message.Content, n, stream.Err())
	}
	// The third answers 429 once with Retry-After, then the reply.
	_, err = lead.Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != 429 || oerr.Response.Header.Get("Retry-After") != "2" {
		t.Fatalf("scripted 429: %v", err)
	}
	if resp, err := lead.Chat.Completions.New(t.Context(), chatParams); err != nil || resp.Choices[0].Message.Content != "after one 429" {
		t.Fatalf("after the 429: %v", err)
	}
	// Past the end of the script: a loud error, never a plausible answer.
	_, err = lead.Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != 500 || oerr.Type != "mock_script_exhausted" || !strings.Contains(oerr.Message, "runs past the end of its 3 steps") {
		t.Errorf("exhausted script: %v", err)
	}
	// A step whose match fails says what it expected and what it saw.
	_, err = f.openai("worker-1").Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.Type != "mock_script_mismatch" || !strings.Contains(oerr.Message, `expects the last message to be from "tool" and contain "exit 0"`) {
		t.Errorf("mismatch: %v", err)
	}
	_, err = f.anthropic("nobody-1").Messages.New(t.Context(), messageParams)
	if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || !strings.Contains(aerr.RawJSON(), "mock_no_script") {
		t.Errorf("no script: %v", err)
	}
	// Usage from the script is metered like an upstream's.
	r := f.records(t, "lead-1")[0]
	if r.InputTokens != 1000 || r.CachedTokens != 400 || math.Abs(r.CostUSD-wantCost) > 1e-12 {
		t.Errorf("scripted usage record %+v", r)
	}
}

// TestMockQuotesTheLastMessage: {{.Last}} is the text of the call's last
// message, so a scripted model can quote a tool's result as a real one may.
func TestMockQuotesTheLastMessage(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "echo-1", Role: "echo", Kind: "worker", Endpoint: "mock/script"})
	params := openai.ChatCompletionNewParams{Model: "x", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("first"), openai.ToolMessage("exit 0\nthe key is k-123", "call_1"),
	}}
	resp, err := f.openai("echo-1").Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	json.Unmarshal([]byte(resp.Choices[0].Message.ToolCalls[0].Function.Arguments), &args)
	if args["content"] != "I read: exit 0\nthe key is k-123" {
		t.Errorf("content %q", args["content"])
	}
}

func TestMockSpeaksAnthropicAndCuts(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "lead-1", Role: "lead", Kind: "orchestrator", Endpoint: "mock/script"},
		AgentSpec{ID: "worker-1", Role: "implementer", Endpoint: "mock/script"},
		AgentSpec{ID: "s-1", Role: "streamy", Endpoint: "mock/script"})
	msg, err := f.anthropic("lead-1").Messages.New(t.Context(), messageParams)
	if err != nil {
		t.Fatal(err)
	}
	tool := msg.Content[0]
	if tool.Type != "tool_use" || tool.Name != "send_message" || !strings.Contains(string(tool.Input), "@worker-1") || msg.StopReason != "tool_use" {
		t.Errorf("anthropic tool use %+v", msg)
	}
	stream := f.anthropic("lead-1").Messages.NewStreaming(t.Context(), messageParams)
	var acc anthropic.Message
	for stream.Next() {
		acc.Accumulate(stream.Current())
	}
	if stream.Err() != nil || acc.Content[0].Text != "delegated to worker-1" {
		t.Errorf("anthropic stream %+v %v", acc, stream.Err())
	}
	cut := f.openai("s-1").Chat.Completions.NewStreaming(t.Context(), chatParams)
	for cut.Next() {
	}
	if cut.Err() == nil {
		t.Error("a scripted cut must end the stream with an error")
	}
	recs := f.records(t, "s-1")
	if recs[0].ErrorClass != ClassDisconnect {
		t.Errorf("cut record %+v", recs[0])
	}
}

func TestOpenErrors(t *testing.T) {
	g := New(Endpoints{"oa": {Name: "oa", API: OpenAI, BaseURL: "http://x", APIKeyEnv: "TROUPE_TEST_MISSING_KEY"}})
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

// TestRealKeyStaysOnTheHost runs calls of every kind, then reads every file
// the gateway wrote and everything it logged: the real key must be in none.
func TestRealKeyStaysOnTheHost(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"}, AgentSpec{ID: "b-1", Endpoint: "an"})
	f.openai("a-1").Chat.Completions.New(t.Context(), chatParams)
	s := f.openai("a-1").Chat.Completions.NewStreaming(t.Context(), chatParams)
	for s.Next() {
	}
	f.anthropic("b-1").Messages.New(t.Context(), messageParams)
	f.up.status.Store(401)
	f.anthropic("b-1").Messages.New(t.Context(), messageParams)
	bad := openai.NewClient(option.WithBaseURL(f.g.URL()+"/v1/"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	bad.Chat.Completions.New(t.Context(), chatParams)
	if f.up.calls.Load() < 4 {
		t.Fatalf("the upstream saw %d calls", f.up.calls.Load())
	}
	found := 0
	filepath.WalkDir(f.logs, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := os.ReadFile(path)
		found++
		if bytes.Contains(data, []byte(realKey)) {
			t.Errorf("%s holds the real key", path)
		}
		return nil
	})
	if found != 2 {
		t.Errorf("read %d record files", found)
	}
	if strings.Contains(f.logBuf.String(), realKey) {
		t.Error("the gateway logged the real key")
	}
	if s := fmt.Sprint(f.g.Endpoints); strings.Contains(s, realKey) {
		t.Error("an endpoint's description holds the key")
	}
}

func TestModelsRoute(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	page, err := f.openai("a-1").Models.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "oa" {
		t.Errorf("models %+v", page.Data)
	}
	resp, err := http.Get(f.g.URL() + "/v1/nothing")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), "POST /v1/chat/completions") {
		t.Errorf("unknown path: %d %s", resp.StatusCode, body)
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
	g := New(Endpoints{"oa": {Name: "oa", API: OpenAI, BaseURL: up.URL, Model: "m"}})
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

// TestTrialCloseRecordsCallsInFlight: the trial's teardown closes the
// agents' logs after Close, so Close must not return before a call in flight
// is recorded, and must refuse new calls at once. A call not yet forwarded
// (held by an injected delay) brings no usage figure: Close ends it at once
// and the agent is told why.
func TestTrialCloseRecordsCallsInFlight(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	f.g.SetFaults(Fault{Delay: time.Hour, Times: 1})
	client := f.openai("a-1")
	done := make(chan error, 1)
	go func() {
		_, err := client.Chat.Completions.New(context.Background(), chatParams)
		done <- err
	}()
	waitInFlight(t, f.trial)
	if err := f.trial.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs := f.records(t, "a-1")
	if len(recs) != 1 || recs[0].ErrorClass != ClassDisconnect || !strings.Contains(recs[0].Error, "the trial ended during an injected delay") {
		t.Errorf("Close returned with records %+v, want the call in flight recorded as ended by the trial", recs)
	}
	if oerr, ok := errors.AsType[*openai.Error](<-done); !ok || oerr.StatusCode != http.StatusBadGateway || !strings.Contains(oerr.Message, "the trial ended") {
		t.Errorf("the call in flight must be told the trial ended: %v", oerr)
	}
	if _, err := client.Chat.Completions.New(t.Context(), chatParams); err == nil {
		t.Error("a call after Close was answered")
	}
	if f.up.calls.Load() != 0 {
		t.Errorf("the upstream saw %d calls", f.up.calls.Load())
	}
	short, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	if err := f.trial.Close(short); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
