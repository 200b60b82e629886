package modelcall

import (
	"encoding/json"
	"strings"
)

// Asked is what a call asked of the model beside its messages: the
// generation settings as the agent sent them, in any of the three wire
// formats. A result can then show that a condition's thinking effort or
// output limit reached the model, not only the manifest.
type Asked struct {
	// ReasoningEffort is chat completions' reasoning_effort, the Responses
	// API's reasoning.effort, or Anthropic's output_config.effort.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// ThinkingBudgetTokens is Anthropic's thinking.budget_tokens.
	ThinkingBudgetTokens int64 `json:"thinking_budget_tokens,omitempty"`
	// MaxOutputTokens is max_completion_tokens (or the older max_tokens),
	// the Responses API's max_output_tokens, or Anthropic's max_tokens.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
}

// Asked reads what the request asks beside its messages, leniently: a
// field of the wrong shape is left out (the upstream judges the request,
// not the meter). nil when it asks nothing.
func (r Request) Asked() *Asked {
	req := r.Fields
	var a Asked
	str := func(raw json.RawMessage) string {
		var s string
		json.Unmarshal(raw, &s)
		return strings.TrimSpace(s)
	}
	num := func(raw json.RawMessage) int64 {
		var n int64
		json.Unmarshal(raw, &n)
		return max(n, 0)
	}
	field := func(raw json.RawMessage, key string) json.RawMessage {
		var obj map[string]json.RawMessage
		json.Unmarshal(raw, &obj)
		return obj[key]
	}
	switch r.API {
	case OpenAI:
		a.ReasoningEffort = str(req["reasoning_effort"])
		a.MaxOutputTokens = num(req["max_completion_tokens"])
		if a.MaxOutputTokens == 0 {
			a.MaxOutputTokens = num(req["max_tokens"])
		}
	case OpenAIResponses:
		a.ReasoningEffort = str(field(req["reasoning"], "effort"))
		a.MaxOutputTokens = num(req["max_output_tokens"])
	case Anthropic:
		a.ReasoningEffort = str(field(req["output_config"], "effort"))
		a.ThinkingBudgetTokens = num(field(req["thinking"], "budget_tokens"))
		a.MaxOutputTokens = num(req["max_tokens"])
	}
	if a == (Asked{}) {
		return nil
	}
	return &a
}
