//go:build !nosdk

package llm

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

var responseParams = responses.ResponseNewParams{
	Model:        "gpt-the-agent-wants",
	Instructions: openai.String("You are a careful coder."),
	Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Create /app/hello.txt")},
	Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("shell", map[string]any{
		"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []string{"command"},
	}, false)},
}

// streamed is what a Responses stream gave the SDK.
type streamed struct {
	types []string           // the events' types, in order
	final responses.Response // the terminal event's response
	text  string             // the text deltas, joined
	err   error
}

func readStream(s interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) streamed {
	var out streamed
	for s.Next() {
		ev := s.Current()
		out.types = append(out.types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			out.text += ev.Delta
		case "response.completed", "response.incomplete", "response.failed":
			out.final = ev.Response
		}
	}
	out.err = s.Err()
	return out
}

// TestResponsesUsage: a Responses call, streamed or not, through a real
// upstream or a mock, gives the SDK its usage exactly (input, cached,
// output, reasoning) and is metered, priced and recorded with it.
func TestResponsesUsage(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "o-1", Endpoint: "oa"}, AgentSpec{ID: "m-1", Role: "metered", Endpoint: "mock/responses"})
	// What the mock's stream is made of; the upstream's has no in_progress
	// and no content_part.done.
	mockEvents := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed"}
	for _, tc := range []struct {
		name, agent, text, model string
		stream                   bool
	}{
		{"upstream", "o-1", "hello from upstream", "upstream-model-o", false},
		{"upstream streamed", "o-1", "hello from upstream", "upstream-model-o", true},
		{"mock", "m-1", "hello from the mock", "mock/responses", false},
		{"mock streamed", "m-1", "hello from the mock", "mock/responses", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := f.openai(tc.agent)
			var resp responses.Response
			if tc.stream {
				s := readStream(client.Responses.NewStreaming(t.Context(), responseParams))
				if s.err != nil {
					t.Fatal(s.err)
				}
				if s.text != tc.text {
					t.Errorf("deltas %q, want %q", s.text, tc.text)
				}
				if tc.agent == "m-1" && !slices.Equal(s.types, mockEvents) {
					t.Errorf("events %q\nwant %q", s.types, mockEvents)
				}
				resp = s.final
			} else {
				r, err := client.Responses.New(t.Context(), responseParams)
				if err != nil {
					t.Fatal(err)
				}
				resp = *r
			}
			u := resp.Usage
			if resp.OutputText() != tc.text || resp.Status != "completed" || resp.Model != tc.model ||
				u.InputTokens != 1000 || u.InputTokensDetails.CachedTokens != 400 || u.OutputTokens != 200 || u.OutputTokensDetails.ReasoningTokens != 120 {
				t.Errorf("the SDK got %q (%s, model %s), usage %s", resp.OutputText(), resp.Status, resp.Model, u.RawJSON())
			}
			recs := f.records(t, tc.agent)
			r := recs[len(recs)-1]
			if r.API != modelcall.OpenAIResponses || r.Stream != tc.stream || r.Status != 200 || r.ErrorClass != "" || r.Model != tc.model ||
				r.InputTokens != 1000 || r.CachedTokens != 400 || r.OutputTokens != 200 || r.ReasoningTokens != 120 ||
				r.CachedSource != modelcall.CachedReported || math.Abs(r.CostUSD-wantCost) > 1e-12 || r.TTFBMS <= 0 {
				t.Errorf("record %+v", r)
			}
		})
	}
	if f.up.model() != "upstream-model-o" {
		t.Errorf("the upstream was asked for model %q", f.up.model())
	}
	per, total := f.trial.Usage()
	if per["o-1"].Calls != 2 || per["m-1"].Calls != 2 || total.OutputTokens != 800 || math.Abs(float64(total.CostUSD)-4*wantCost) > 1e-12 {
		t.Errorf("totals %+v %+v", per, total)
	}
}

// TestResponsesToolCallRoundTrip: a mock scripts a function call, the agent
// runs it and sends back its output as a function_call_output item, and the
// mock's next step matches that output as the tool's message and quotes it.
func TestResponsesToolCallRoundTrip(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "coder-1", Role: "coder", Endpoint: "mock/responses"}, AgentSpec{ID: "coder-2", Role: "coder", Endpoint: "mock/responses"})
	for _, tc := range []struct {
		agent  string
		stream bool
	}{{"coder-1", false}, {"coder-2", true}} {
		t.Run(fmt.Sprintf("stream=%t", tc.stream), func(t *testing.T) {
			client := f.openai(tc.agent)
			call := func(params responses.ResponseNewParams) responses.Response {
				t.Helper()
				if !tc.stream {
					r, err := client.Responses.New(t.Context(), params)
					if err != nil {
						t.Fatal(err)
					}
					return *r
				}
				s := readStream(client.Responses.NewStreaming(t.Context(), params))
				if s.err != nil {
					t.Fatal(s.err)
				}
				return s.final
			}
			resp := call(responseParams)
			if len(resp.Output) != 1 || resp.Output[0].Type != "function_call" {
				t.Fatalf("output %s", resp.RawJSON())
			}
			fc := resp.Output[0].AsFunctionCall()
			var args struct{ Command string }
			if err := json.Unmarshal([]byte(fc.Arguments), &args); err != nil || fc.Name != "shell" || fc.CallID == "" || !strings.Contains(args.Command, "/app/hello.txt") {
				t.Fatalf("function call %+v: %v", fc, err)
			}
			output := responses.ResponseInputItemParamOfFunctionCallOutput("Hello, world!")
			output.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
			next := responseParams
			next.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("Create /app/hello.txt", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name),
				output,
			}}
			resp = call(next)
			if resp.OutputText() != "The file holds: Hello, world!" {
				t.Errorf("second answer %q", resp.OutputText())
			}
			// The request's own text was estimated: instructions and every item.
			recs := f.records(t, tc.agent)
			if len(recs) != 2 || recs[1].InputTokens <= recs[0].InputTokens || recs[1].ErrorClass != "" || recs[1].CachedSource != modelcall.CachedEstimated {
				t.Errorf("records %+v", recs)
			}
		})
	}
}

// TestResponsesBudget: once a budget is spent a Responses call is refused
// with the 429 every format gives, streamed or not, and the SDK, retries
// left to it, does not try again.
func TestResponsesBudget(t *testing.T) {
	tokens := int64(300)
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa", Budget: manifest.Budget{MaxOutputTokens: &tokens}})
	// The SDK's own retries, which would retry a 429.
	client := openai.NewClient(option.WithBaseURL(f.g.URL()+"/v1/"), option.WithAPIKey(f.trial.Token("a-1").Reveal()))
	for range 2 { // 200 + 200 output tokens cross 300; the call that crosses completes
		if _, err := client.Responses.New(t.Context(), responseParams); err != nil {
			t.Fatal(err)
		}
	}
	_, spent := f.trial.Usage()
	refusals := []struct {
		name string
		call func() error
	}{
		{"responses", func() error { _, err := client.Responses.New(t.Context(), responseParams); return err }},
		{"responses streamed", func() error { return readStream(client.Responses.NewStreaming(t.Context(), responseParams)).err }},
		{"chat completions", func() error { _, err := client.Chat.Completions.New(t.Context(), chatParams); return err }},
	}
	var bodies []string
	for i, tc := range refusals {
		err := tc.call()
		oerr, ok := errors.AsType[*openai.Error](err)
		if !ok || oerr.StatusCode != 429 || oerr.Type != modelcall.ClassBudgetExhausted || !strings.Contains(oerr.Message, "agent a-1's max_output_tokens is spent (400 of 300)") ||
			oerr.Response.Header.Get("X-Should-Retry") != "false" {
			t.Fatalf("%s: %v", tc.name, err)
		}
		bodies = append(bodies, oerr.RawJSON())
		// One record per refusal: the SDK did not retry.
		if recs := f.records(t, "a-1"); len(recs) != 3+i {
			t.Errorf("%s: %d records; the SDK retried a spent budget", tc.name, len(recs))
		}
	}
	if bodies[0] != bodies[2] || bodies[1] != bodies[2] {
		t.Errorf("refusal bodies differ between formats:\n%s\n%s\n%s", bodies[0], bodies[1], bodies[2])
	}
	if _, total := f.trial.Usage(); total != spent || f.up.calls.Load() != 2 {
		t.Errorf("refusals spent: totals %+v, then %+v; the upstream saw %d calls", spent, total, f.up.calls.Load())
	}
	for _, r := range f.records(t, "a-1")[2:] {
		if r.ErrorClass != modelcall.ClassBudgetExhausted || r.Status != 429 || r.CostUSD != 0 {
			t.Errorf("refusal record %+v", r)
		}
	}
	if e := <-f.trial.Exhausted(); e.Agent != "a-1" || e.Budget != "max_output_tokens" {
		t.Errorf("exhaustion %+v", e)
	}
}

// TestResponsesFaults: injected faults and a stream's own errors shape a
// Responses call as they do the other formats'.
func TestResponsesFaults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    *Fault
		upstream http.HandlerFunc
		stream   bool
		status   int    // the status the SDK sees; 0 for a stream that fails
		events   int    // events the SDK sees before a stream fails
		class    string // the record's
		fault2   string // the record's fault
		forward  bool   // the call reaches the upstream
	}{
		{name: "status 500", fault: &Fault{Status: 500}, status: 500, class: modelcall.ClassUpstream5xx, fault2: "status 500"},
		{name: "status 503 streamed", fault: &Fault{Status: 503, RetryAfter: 2 * time.Second}, stream: true, status: 503, class: modelcall.ClassOverloaded, fault2: "status 503"},
		{name: "stream cut after 2 events", fault: &Fault{CutAfterEvents: 2}, stream: true, events: 2, class: modelcall.ClassDisconnect, fault2: "cut after 2 events", forward: true},
		{name: "error event", stream: true, events: 2, class: modelcall.ClassRateLimit, forward: true, upstream: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			writeResponsesEvents(w, `{"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[]}}`,
				`{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null}`)
		}},
		{name: "failed response", stream: true, events: 2, class: modelcall.ClassUpstream5xx, forward: true, upstream: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			writeResponsesEvents(w, `{"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[]}}`,
				`{"type":"response.failed","response":{"id":"resp_1","status":"failed","output":[],"error":{"code":"server_error","message":"the model failed"},"usage":{"input_tokens":10,"output_tokens":0}}}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
			if tc.fault != nil {
				f.g.SetFaults(*tc.fault)
			}
			if tc.upstream != nil {
				f.up.answerWith(tc.upstream)
			}
			client := f.openai("a-1")
			var err error
			if tc.stream {
				s := readStream(client.Responses.NewStreaming(t.Context(), responseParams))
				err = s.err
				if tc.status == 0 && (len(s.types) != tc.events || (err == nil && tc.class == modelcall.ClassDisconnect)) {
					t.Errorf("the SDK saw events %q, then %v", s.types, err)
				}
			} else {
				_, err = client.Responses.New(t.Context(), responseParams)
			}
			if tc.status != 0 {
				if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != tc.status {
					t.Errorf("SDK error %v, want status %d", err, tc.status)
				}
			}
			if got := f.up.calls.Load() > 0; got != tc.forward {
				t.Errorf("the upstream saw %d calls", f.up.calls.Load())
			}
			recs := f.records(t, "a-1")
			if len(recs) != 1 {
				t.Fatalf("records %+v", recs)
			}
			if r := recs[0]; r.API != modelcall.OpenAIResponses || r.ErrorClass != tc.class || r.Fault != tc.fault2 || (tc.fault == nil && r.Error == "") {
				t.Errorf("record %+v", r)
			}
		})
	}
}

// TestResponsesRefused: what the gateway cannot serve on /v1/responses is
// refused with a 400 that says why, and never forwarded.
func TestResponsesRefused(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "an"}, AgentSpec{ID: "o-1", Endpoint: "oa"})
	background := responseParams
	background.Background = openai.Bool(true)
	for _, tc := range []struct {
		name, agent string
		params      responses.ResponseNewParams
		want        string
	}{
		{"anthropic endpoint", "a-1", responseParams, "endpoint an does not speak OpenAI's Responses API (/v1/responses): it speaks the anthropic API; call /v1/messages"},
		{"background response", "o-1", background, "background responses are not served"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.openai(tc.agent).Responses.New(t.Context(), tc.params)
			if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != 400 || !strings.Contains(oerr.Message, tc.want) {
				t.Errorf("%v, want 400 saying %q", err, tc.want)
			}
			if r := f.records(t, tc.agent)[0]; r.Status != 400 || r.ErrorClass != modelcall.ClassBadRequest || r.API != modelcall.OpenAIResponses {
				t.Errorf("record %+v", r)
			}
		})
	}
	if f.up.calls.Load() != 0 {
		t.Errorf("the upstream saw %d refused calls", f.up.calls.Load())
	}
}

// TestCountTokens: /v1/messages/count_tokens is answered (by the mock's
// estimate, or by the upstream's count_tokens) without being charged,
// counted against max_calls, given a fault or recorded, before and after
// the budget is spent.
func TestCountTokens(t *testing.T) {
	two := int64(2)
	for _, tc := range []struct {
		name  string
		agent AgentSpec
		want  int64 // 0: the estimate of the mock's answer's input
	}{
		{"mock", AgentSpec{ID: "c-1", Role: "counter", Endpoint: "mock/responses", Budget: manifest.Budget{MaxCalls: &two}}, 0},
		{"anthropic upstream", AgentSpec{ID: "c-1", Endpoint: "an", Budget: manifest.Budget{MaxCalls: &two}}, 4242},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.agent)
			f.g.SetFaults(Fault{Status: 503, Times: 1})
			client := f.anthropic("c-1")
			params := anthropic.MessageCountTokensParams{Model: "claude-the-agent-wants", Messages: messageParams.Messages,
				System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("You are a careful coder.")}}
			count := func() int64 {
				t.Helper()
				n, err := client.Messages.CountTokens(t.Context(), params)
				if err != nil {
					t.Fatalf("count_tokens: %v", err)
				}
				return n.InputTokens
			}
			first := count()
			count()
			// The fault was left for the model call.
			_, err := client.Messages.New(t.Context(), messageParams)
			if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || aerr.StatusCode != 503 {
				t.Fatalf("the first model call must take the fault: %v", err)
			}
			count()
			msgs := messageParams
			msgs.System = []anthropic.TextBlockParam{{Text: "You are a careful coder."}}
			if _, err := client.Messages.New(t.Context(), msgs); err != nil {
				t.Fatalf("max_calls 2 and one call made: %v", err)
			}
			before, _ := f.trial.Usage()
			if n := count(); n != first {
				t.Errorf("count_tokens with the budget spent: %d, then %d", first, n)
			}
			_, err = client.Messages.New(t.Context(), messageParams)
			if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || aerr.StatusCode != 429 {
				t.Fatalf("a third model call: %v", err)
			}
			after, _ := f.trial.Usage()
			if after["c-1"] != before["c-1"] || after["c-1"].Calls != 2 {
				t.Errorf("usage %+v, then %+v", before["c-1"], after["c-1"])
			}
			recs := f.records(t, "c-1")
			if len(recs) != 3 || recs[0].Status != 503 || recs[1].Status != 200 || recs[2].Status != 429 {
				t.Fatalf("records %+v: count_tokens must leave none", recs)
			}
			want := cmp.Or(tc.want, recs[1].InputTokens)
			if first != want {
				t.Errorf("count_tokens said %d, want %d", first, want)
			}
			if tc.agent.Endpoint == "an" && f.up.model() != "upstream-model-a" {
				t.Errorf("the upstream was asked for model %q", f.up.model())
			}
		})
	}
	t.Run("openai endpoint", func(t *testing.T) {
		f := newFixture(t, AgentSpec{ID: "o-1", Endpoint: "oa"})
		_, err := f.anthropic("o-1").Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: "x", Messages: messageParams.Messages})
		if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || aerr.StatusCode != 400 || !strings.Contains(aerr.RawJSON(), "speaks the openai API") {
			t.Errorf("%v", err)
		}
		if f.up.calls.Load() != 0 {
			t.Error("a refused count_tokens reached the upstream")
		}
	})
}
