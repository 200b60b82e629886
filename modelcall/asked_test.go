package modelcall

import (
	"encoding/json"
	"testing"
)

func TestAskedOf(t *testing.T) {
	for _, c := range []struct {
		api  API
		body string
		want string
	}{
		{OpenAI, `{"reasoning_effort":"high","max_completion_tokens":900}`, `{"reasoning_effort":"high","max_output_tokens":900}`},
		{OpenAI, `{"max_tokens":50}`, `{"max_output_tokens":50}`},
		{OpenAI, `{"reasoning_effort":7,"max_tokens":"x"}`, `null`},
		{OpenAIResponses, `{"reasoning":{"effort":"low"},"max_output_tokens":30}`, `{"reasoning_effort":"low","max_output_tokens":30}`},
		{Anthropic, `{"max_tokens":100,"thinking":{"type":"enabled","budget_tokens":2048}}`, `{"thinking_budget_tokens":2048,"max_output_tokens":100}`},
		{Anthropic, `{"max_tokens":-3,"output_config":{"effort":"max"}}`, `{"reasoning_effort":"max"}`},
		{OpenAI, `{}`, `null`},
	} {
		var req map[string]json.RawMessage
		json.Unmarshal([]byte(c.body), &req)
		got, _ := json.Marshal(Request{API: c.api, Fields: req}.Asked())
		if string(got) != c.want {
			t.Errorf("%s %s: %s, want %s", c.api, c.body, got, c.want)
		}
	}
}
