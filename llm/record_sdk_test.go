//go:build !nosdk

package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/modelcall"
)

// TestConversationRecord: every call is kept whole, its request as the
// upstream got it (history and all) and its answer as the agent got it,
// streamed or not, with no token in it.
func TestConversationRecord(t *testing.T) {
	rec := &syncbuf.Buffer{}
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa", Conversation: rec})
	client := f.openai("a-1")
	token := f.trial.Token("a-1").Reveal()
	history := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(strings.Repeat("You are a careful agent. ", 40))}
	for i := range 3 {
		history = append(history, openai.UserMessage(fmt.Sprintf("step %d (my token is %s)", i, token)))
		p := chatParams
		p.Messages = history
		if _, err := client.Chat.Completions.New(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		history = append(history, openai.AssistantMessage(fmt.Sprintf("done %d", i)))
	}
	s := client.Chat.Completions.NewStreaming(t.Context(), chatParams)
	for s.Next() {
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	data := rec.Bytes()
	if bytes.Contains(data, []byte(token)) || bytes.Contains(data, []byte(realKey)) {
		t.Error("the record holds the agent's token or the real key")
	}
	calls, missing, err := modelcall.ReadConversation(bytes.NewReader(data))
	if err != nil || missing != 0 || len(calls) != 4 {
		t.Fatalf("%d calls, %d blocks missing, %v", len(calls), missing, err)
	}
	for i, c := range calls[:3] {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(c.Request, &req); err != nil {
			t.Fatal(err)
		}
		if req.Model != "upstream-model-o" || len(req.Messages) != 2+2*i || req.Messages[len(req.Messages)-1].Content != fmt.Sprintf("step %d (my token is [redacted by troupe])", i) {
			t.Errorf("call %d: %+v", i+1, req)
		}
		if c.N != int64(i+1) || c.Status != 200 || c.Stream || !bytes.Contains(c.Answer, []byte(`"choices"`)) {
			t.Errorf("call %d: %+v", i+1, c)
		}
	}
	if c := calls[3]; !c.Stream || !strings.Contains(c.AnswerText, "data: ") || c.Answer != nil {
		t.Errorf("the streamed call: %+v", c)
	}
	// The system prompt, sent three times, is in the record once.
	if n := bytes.Count(data, []byte(strings.Repeat("You are a careful agent. ", 40))); n != 1 {
		t.Errorf("the system prompt is in the record %d times", n)
	}
	checkTamperEvident(t, data)
}

// checkTamperEvident: a record as written verifies; each edit of it, of a
// block, an answer, a call's figures, its first line or its calls' order,
// is refused with the line that was changed.
func checkTamperEvident(t *testing.T, data []byte) {
	t.Helper()
	rr := modelcall.NewRecordReader(bytes.NewReader(data), modelcall.RecordLimits{})
	if err := rr.Each(func(modelcall.Call) {}); err != nil || !rr.Verified() {
		t.Fatalf("the record as written: %v, verified %v", err, rr.Verified())
	}
	lines := strings.SplitAfter(string(data), "\n")
	lineOf := func(sub string) int {
		for i, l := range lines {
			if strings.Contains(l, sub) {
				return i + 1
			}
		}
		t.Fatalf("no line holds %q", sub)
		return 0
	}
	edit := func(line int, from, to string) string {
		out := slices.Clone(lines)
		out[line-1] = strings.Replace(out[line-1], from, to, 1)
		return strings.Join(out, "")
	}
	callLine := lineOf(`"call":2,`)
	withoutCall2 := strings.Join(slices.Delete(slices.Clone(lines), callLine-1, callLine), "")
	call3 := len(strings.SplitAfter(withoutCall2[:strings.Index(withoutCall2, `"call":3,`)], "\n"))
	for _, tc := range []struct {
		name, record string
		line         int
		want         string
	}{
		{"a block's text", edit(lineOf("careful agent"), "careful", "carefree"), lineOf("careful agent"), "does not match its content"},
		{"an answer", edit(callLine, `"content":"`, `"content":"not `), callLine, "call 2 does not match its digest"},
		{"a status", edit(callLine, `"status":200`, `"status":201`), callLine, "call 2 does not match its digest"},
		{"the first line taken out", strings.Join(lines[1:], ""), 1, "does not match its digest"},
		{"a call taken out", withoutCall2, call3, "call 3 follows call 1"},
	} {
		rr := modelcall.NewRecordReader(strings.NewReader(tc.record), modelcall.RecordLimits{})
		err := rr.Each(func(modelcall.Call) {})
		e, ok := errors.AsType[*modelcall.TamperedError](err)
		if !ok || !strings.Contains(err.Error(), tc.want) || tc.name != "the first line taken out" && e.Line != tc.line {
			t.Errorf("%s: %v, want line %d: %s", tc.name, err, tc.line, tc.want)
		}
	}
}
