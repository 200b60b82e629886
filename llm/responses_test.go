package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// responsesScenario scripts the mock's Responses answers: usage to meter
// exactly, a tool call round trip, and a step with estimated usage.
const responsesScenario = `description: "scripted answers for the Responses API tests"
scripts:
  metered:
    - reply: "hello from the mock"
      chunks: 3
      usage: {input_tokens: 1000, output_tokens: 200, cached_tokens: 400, reasoning_tokens: 120}
    - reply: "hello from the mock"
      chunks: 3
      usage: {input_tokens: 1000, output_tokens: 200, cached_tokens: 400, reasoning_tokens: 120}
  coder:
    - name: write the file
      match: {role: user, contains: hello.txt}
      tool_calls:
        - name: shell
          arguments: {command: "printf 'Hello, world!' > /app/hello.txt && cat /app/hello.txt"}
    - name: read the result
      match: {role: tool, contains: "Hello, world!"}
      reply: "The file holds: {{.Last}}"
      chunks: 2
  counter:
    - reply: counted
`

// serveResponses answers /v1/responses as OpenAI does, with the upstream's
// fixed usage (1,000 input tokens of which 400 cached, 200 output) and 120
// reasoning tokens. It refuses stream_options.include_usage, as OpenAI's
// Responses API does.
func (u *upstream) serveResponses(w http.ResponseWriter, body map[string]any) {
	if opts, _ := body["stream_options"].(map[string]any); opts["include_usage"] != nil {
		http.Error(w, `{"error":{"message":"Unknown parameter: 'stream_options.include_usage'."}}`, http.StatusBadRequest)
		return
	}
	model, _ := body["model"].(string)
	usage := `{"input_tokens":1000,"input_tokens_details":{"cached_tokens":400},"output_tokens":200,"output_tokens_details":{"reasoning_tokens":120},"total_tokens":1200}`
	msg := `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hello from upstream","annotations":[]}]}`
	resp := func(status, output, usage string) string {
		return fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1,"status":%q,"model":%q,"output":%s,"usage":%s}`, status, model, output, usage)
	}
	if stream, _ := body["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, resp("completed", "["+msg+"]", usage))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	writeResponsesEvents(w,
		`{"type":"response.created","response":`+resp("in_progress", "[]", "null")+`}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
		`{"type":"response.content_part.added","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`,
		`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"hello "}`,
		`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"from upstream"}`,
		`{"type":"response.output_text.done","item_id":"msg_1","output_index":0,"content_index":0,"text":"hello from upstream"}`,
		`{"type":"response.output_item.done","output_index":0,"item":`+msg+`}`,
		`{"type":"response.completed","response":`+resp("completed", "["+msg+"]", usage)+`}`,
	)
}

// writeResponsesEvents writes Responses stream events, each named and
// numbered as OpenAI does, and flushed.
func writeResponsesEvents(w http.ResponseWriter, events ...string) {
	for i, ev := range events {
		var typ struct{ Type string }
		json.Unmarshal([]byte(ev), &typ)
		ev = strings.Replace(ev, "{", fmt.Sprintf(`{"sequence_number":%d,`, i), 1)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ.Type, ev)
		w.(http.Flusher).Flush()
	}
}

// TestResponsesHangUpBeforeUsageIsDrained: an agent that hangs up on a
// real upstream's Responses stream before response.completed is still
// metered, from the usage the provider reports at the end.
func TestResponsesHangUpBeforeUsageIsDrained(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeResponsesEvents(w, `{"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[]}}`)
		time.Sleep(300 * time.Millisecond) // the agent is gone by now
		writeResponsesEvents(w, `{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"late"}`,
			`{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[],"usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":400},"output_tokens":200,"output_tokens_details":{"reasoning_tokens":120}}}}`)
	})
	ctx, hangUp := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.g.URL()+"/v1/responses", strings.NewReader(`{"model":"x","stream":true,"input":"hi"}`))
	req.Header.Set("Authorization", "Bearer "+f.trial.Token("a-1").Reveal())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); line != "event: response.created\n" {
		t.Fatalf("first line %q", line)
	}
	hangUp()
	resp.Body.Close()
	if err := f.trial.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// (Whether the record says disconnect depends on whether the gateway's
	// last writes to the gone agent failed; the usage does not.)
	if r := f.records(t, "a-1")[0]; r.InputTokens != 1000 || r.CachedTokens != 400 || r.OutputTokens != 200 || r.ReasoningTokens != 120 {
		t.Errorf("record %+v", r)
	}
}

// TestScenarioReasoningTokens: a step's reasoning tokens are part of its
// output tokens, and a script that says otherwise is refused where it says so.
func TestScenarioReasoningTokens(t *testing.T) {
	for _, tc := range []struct {
		yaml, err string
	}{
		{"scripts:\n  a:\n    - reply: x\n      usage: {output_tokens: 200, reasoning_tokens: 120}\n", ""},
		{"scripts:\n  a:\n    - reply: x\n      usage: {output_tokens: 100, reasoning_tokens: 120}\n", "s.yaml:4:14: scripts.a[0].usage: reasoning_tokens (120) are part of output_tokens (100) and cannot exceed them"},
	} {
		sc, err := LoadScenario("s.yaml", []byte(tc.yaml))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil || sc.scripts["a"][0].step.Usage.Reasoning != 120 {
			t.Errorf("%q: %v", tc.yaml, err)
		}
	}
}
