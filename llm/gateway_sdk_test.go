//go:build !nosdk

package llm

// The tests in the *_sdk_test.go files drive the gateway through the official
// OpenAI and Anthropic SDKs. The nosdk build tag leaves them out: .ci/fuzz
// sets it, since a fuzzing build instruments every package it links, and the
// two SDKs compiled that way cost more than the rest of the fuzzing's build.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

func (f *fixture) openai(agent string) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(f.g.URL()+"/v1/"), option.WithAPIKey(f.trial.Token(agent).Reveal()), option.WithMaxRetries(0))
	return &c
}

func (f *fixture) anthropic(agent string) *anthropic.Client {
	c := anthropic.NewClient(aoption.WithBaseURL(f.g.URL()+"/"), aoption.WithAPIKey(f.trial.Token(agent).Reveal()), aoption.WithMaxRetries(0))
	return &c
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
			r.CachedSource != modelcall.CachedReported || math.Abs(r.CostUSD-wantCost) > 1e-12 || r.ErrorClass != "" ||
			r.Model != "upstream-model-o" || r.Stream != (i == 1) || r.TTFBMS <= 0 || r.LatencyMS < r.TTFBMS {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	per, total := f.trial.Usage()
	if per["a-1"].Calls != 2 || total.InputTokens != 2000 || math.Abs(float64(total.CostUSD)-2*wantCost) > 1e-12 {
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
		if r.Status != 200 || r.InputTokens != 1000 || r.CachedTokens != 400 || r.OutputTokens != 200 || math.Abs(r.CostUSD-wantCost) > 1e-12 || r.API != modelcall.Anthropic {
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
	if r.CachedSource != modelcall.CachedEstimated || r.CachedTokens != 250 || math.Abs(r.CostUSD-0.003625) > 1e-12 {
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
	if last := recs[len(recs)-1]; last.ErrorClass != modelcall.ClassBudgetExhausted || last.Status != 429 || last.CostUSD != 0 || !last.Uncounted || recs[0].Uncounted {
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
	g := New(Endpoints{"oa": {Name: "oa", API: modelcall.OpenAI, BaseURL: up.srv.URL + "/v1", APIKeyEnv: "K", Model: "m"}})
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
	// The cap is reported the moment the call that crosses it completes.
	select {
	case e := <-trial.Exhausted():
		if e.Agent != "" || e.Budget != "max_cost_usd" || math.Abs(e.Spent-2*wantCost) > 1e-12 {
			t.Errorf("exhaustion %+v", e)
		}
	default:
		t.Fatal("the trial's spent cap was not reported when it was spent")
	}
	c := openai.NewClient(option.WithBaseURL(g.URL()+"/v1/"), option.WithAPIKey(trial.Token("a-1").Reveal()), option.WithMaxRetries(0))
	_, err = c.Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != 429 || !strings.Contains(oerr.Message, "the trial's max_cost_usd") {
		t.Errorf("call after the trial's cap: %v", err)
	}
}

func TestUpstreamErrorsPassThrough(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"}, AgentSpec{ID: "b-1", Endpoint: "an"})
	for _, tt := range []struct {
		status int
		class  string
	}{{429, modelcall.ClassRateLimit}, {503, modelcall.ClassOverloaded}, {529, modelcall.ClassOverloaded}, {500, modelcall.ClassUpstream5xx}, {400, modelcall.ClassBadRequest}} {
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
	if r := recs[1]; r.ErrorClass != modelcall.ClassDisconnect || !strings.Contains(r.Fault, "cut after 1 events") {
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
	if r := f.records(t, "b-1")[0]; r.ErrorClass != modelcall.ClassDisconnect || r.Fault != "hang" {
		t.Errorf("hang record %+v", r)
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
	if recs[0].ErrorClass != modelcall.ClassDisconnect {
		t.Errorf("cut record %+v", recs[0])
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
	if len(recs) != 1 || recs[0].ErrorClass != modelcall.ClassDisconnect || !strings.Contains(recs[0].Error, "the trial ended during an injected delay") {
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
