//go:build !nosdk

package llm

import (
	"fmt"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// TestRecordSaysWhatWasAsked: each format's generation settings, sent by
// the official SDKs, are in the call's record.
func TestRecordSaysWhatWasAsked(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"}, AgentSpec{ID: "b-1", Endpoint: "an"})
	p := chatParams
	p.ReasoningEffort = shared.ReasoningEffortHigh
	p.MaxCompletionTokens = openai.Int(1234)
	if _, err := f.openai("a-1").Chat.Completions.New(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	rp := responses.ResponseNewParams{Model: "x", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow}, MaxOutputTokens: openai.Int(77)}
	f.openai("a-1").Responses.New(t.Context(), rp) // the test upstream's answer may not be a Responses one: the record is what counts
	m := messageParams
	m.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
	if _, err := f.anthropic("b-1").Messages.New(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, agent := range []string{"a-1", "b-1"} {
		for _, r := range f.records(t, agent) {
			got = append(got, fmt.Sprintf("%s %+v", r.API, *r.Asked))
		}
	}
	want := []string{"openai {ReasoningEffort:high ThinkingBudgetTokens:0 MaxOutputTokens:1234}", "openai-responses {ReasoningEffort:low ThinkingBudgetTokens:0 MaxOutputTokens:77}",
		"anthropic {ReasoningEffort: ThinkingBudgetTokens:1024 MaxOutputTokens:100}"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records:\n%v\nwant\n%v", got, want)
	}
}
