//go:build !nosdk

package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/troupebench/troupe/manifest"
)

// ask makes one call in one wire format, through its official SDK: a
// system prompt and a user message, then a tool's result when result is
// set. It returns the answer's text, or "tool <name>" for a tool call.
type ask func(ctx context.Context, system, user, result string) (string, error)

// askers are the three wire formats' ask, by the name of the format,
// each with its own agent's token.
func askers(url string, token func(format string) string) map[string]ask {
	chat := func(ctx context.Context, system, user, result string) (string, error) {
		c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(token("chat")), option.WithMaxRetries(0))
		msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(user)}
		if result != "" {
			msgs = append(msgs, openai.ToolMessage(result, "call_1"))
		}
		resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "x", Messages: msgs})
		if err != nil {
			return "", err
		}
		if m := resp.Choices[0].Message; len(m.ToolCalls) > 0 {
			return "tool " + m.ToolCalls[0].Function.Name, nil
		}
		return resp.Choices[0].Message.Content, nil
	}
	resp := func(ctx context.Context, system, user, result string) (string, error) {
		c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(token("responses")), option.WithMaxRetries(0))
		items := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(user, responses.EasyInputMessageRoleUser)}
		if result != "" {
			out := responses.ResponseInputItemParamOfFunctionCallOutput(result)
			out.OfFunctionCallOutput.CallID = openai.String("call_1")
			items = append(items, responses.ResponseInputItemParamOfFunctionCall("{}", "call_1", "shell"), out)
		}
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "x", Instructions: openai.String(system),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}})
		if err != nil {
			return "", err
		}
		for _, o := range r.Output {
			if o.Type == "function_call" {
				return "tool " + o.AsFunctionCall().Name, nil
			}
		}
		return r.OutputText(), nil
	}
	messages := func(ctx context.Context, system, user, result string) (string, error) {
		c := anthropic.NewClient(aoption.WithBaseURL(url+"/"), aoption.WithAPIKey(token("messages")), aoption.WithMaxRetries(0))
		msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(user))}
		if result != "" {
			msgs = append(msgs, anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{}, "shell")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", result, false)))
		}
		m, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "x", MaxTokens: 100, System: []anthropic.TextBlockParam{{Text: system}}, Messages: msgs})
		if err != nil {
			return "", err
		}
		var text string
		for _, b := range m.Content {
			if b.Type == "tool_use" {
				return "tool " + b.Name, nil
			}
			text += b.Text
		}
		return text, nil
	}
	return map[string]ask{"chat": chat, "responses": resp, "messages": messages}
}

const (
	mainSystem  = "You are a coding agent. Use the shell tool."
	titleSystem = "Generate a short title for this conversation. Answer with the title alone."
)

// TestSideCallsThroughEveryFormat: in each wire format a side call (a
// session title, a summary) is answered by the step its system prompt and
// last user message choose, and the main calls get the script's steps in
// order around it.
func TestSideCallsThroughEveryFormat(t *testing.T) {
	agents := map[string]string{"chat": "coder-1", "responses": "coder-2", "messages": "coder-3"}
	var specs []AgentSpec
	for _, id := range agents {
		specs = append(specs, AgentSpec{ID: id, Role: "coder", Endpoint: "mock/sidecalls"})
	}
	f := newFixture(t, specs...)
	for format, ask := range askers(f.g.URL(), func(format string) string { return f.trial.Token(agents[format]).Reveal() }) {
		t.Run(format, func(t *testing.T) {
			for i, c := range []struct{ system, user, result, want string }{
				{titleSystem, "Create /app/hello.txt", "", "Hello file"},
				{mainSystem, "Create /app/hello.txt", "", "tool shell"},
				{titleSystem, "Create /app/hello.txt", "", "Hello file"},
				{"Summarize the session so far.", "Summarize what was done", "", "a summary"},
				{mainSystem, "Create /app/hello.txt", "hi", "written: hi"},
				{"Summarize the session so far.", "Summarize what was done", "", `mock_script_exhausted: scenario sidecalls, script coder: call 6 of agent ` + agents[format] + ` runs past the end of its 2 steps in order, and no step's when`},
			} {
				got, err := ask(t.Context(), c.system, c.user, c.result)
				if oerr, ok := errors.AsType[*openai.Error](err); ok {
					got = oerr.Type + ": " + oerr.Message
				} else if aerr, ok := errors.AsType[*anthropic.Error](err); ok {
					got = string(aerr.Type()) + ": " + aerr.Message
				} else if err != nil {
					got = err.Error()
				}
				if !strings.Contains(got, c.want) {
					t.Errorf("call %d: %s, want %q", i+1, got, c.want)
				}
			}
		})
	}
}

// TestSideCallsRaceTheMainCall: title requests made while the main calls
// run, in every format, never take the main calls' steps nor change
// their order. Run with -race.
func TestSideCallsRaceTheMainCall(t *testing.T) {
	f := newFixture(t)
	const rounds, sides, titles, steps = 8, 3, 4, 6
	for round := range rounds {
		spec := TrialSpec{ID: fmt.Sprintf("race-%d", round), Prices: map[string]manifest.Price{"mock/sidecalls": testPrice}}
		formats := []string{"chat", "responses", "messages"}
		for i := range formats {
			spec.Agents = append(spec.Agents, AgentSpec{ID: fmt.Sprintf("racer-%d", i+1), Role: "racer", Endpoint: "mock/sidecalls"})
		}
		trial, err := f.g.OpenTrial(spec)
		if err != nil {
			t.Fatal(err)
		}
		token := func(format string) string {
			for i, name := range formats {
				if name == format {
					return trial.Token(spec.Agents[i].ID).Reveal()
				}
			}
			return ""
		}
		var wg sync.WaitGroup
		for format, ask := range askers(f.g.URL(), token) {
			wg.Go(func() {
				for k := range steps {
					if got, err := ask(t.Context(), mainSystem, "Create /app/hello.txt", ""); err != nil || got != fmt.Sprintf("step %d", k+1) {
						t.Errorf("round %d, %s, main call %d: %q, %v", round, format, k+1, got, err)
					}
				}
			})
			for range sides {
				wg.Go(func() {
					for range titles {
						if got, err := ask(t.Context(), titleSystem, "Create /app/hello.txt", ""); err != nil || got != "a title" {
							t.Errorf("round %d, %s, title call: %q, %v", round, format, got, err)
						}
					}
				})
			}
		}
		wg.Wait()
		if err := trial.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
