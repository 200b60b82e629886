//go:build !nosdk

package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestConversationRecord: every call is kept whole, its request as the
// upstream got it (history and all) and its answer as the agent got it,
// streamed or not, with no token in it.
func TestConversationRecord(t *testing.T) {
	rec := &lockedBuffer{}
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
	calls, missing, err := ReadConversation(bytes.NewReader(data))
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
}
