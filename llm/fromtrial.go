package llm

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/troupebench/troupe/modelcall"
)

// lastRole is the role of a recorded request's last message, for a
// scenario step's loose match: a Responses function call's output and an
// Anthropic user message of tool results are the tool's, a developer
// message the system's; a request without a history (or with an item that
// is no message) is the user's.
func lastRole(c modelcall.Call) string {
	req, err := modelcall.ParseRequest(c.API, c.Request)
	if err != nil {
		return ""
	}
	for _, k := range []string{"messages", "input"} {
		msgs := modelcall.ParseMessages(req.Fields[k])
		if len(msgs) == 0 || slices.ContainsFunc(msgs, func(m modelcall.Message) bool { return m.Malformed }) {
			continue
		}
		switch last := msgs[len(msgs)-1]; {
		case last.Type == "function_call_output":
			return "tool"
		case last.Role == "developer":
			return "system"
		case c.API == modelcall.Anthropic && last.Role == "user" && last.Content.Has("tool_result"):
			return "tool"
		default:
			return last.Role
		}
	}
	return "user"
}

// WriteScenario writes a mock scenario that plays recorded calls back, in
// order, per agent (agent id → its calls): each step answers what the
// recording answered (its text, tool calls and usage), matching only the
// role of the request's last message, so that harmless prompt changes do
// not break it. A failed call becomes an error step. Each recorded value
// of own (the trial's id, its members' pubkeys) is written as its Live
// text, a template that names the value in the trial playing the
// scenario. The output loads with LoadScenario.
func WriteScenario(w io.Writer, description string, byAgent map[string][]modelcall.Call, own []Same) error {
	var pairs []string
	for _, s := range own {
		pairs = append(pairs, s.Recorded, s.Live)
	}
	names := strings.NewReplacer(pairs...)
	literal := func(s string) string { return names.Replace(escapeTemplate(s)) }
	var b strings.Builder
	q := func(s string) string { data, _ := json.Marshal(s); return string(data) }
	fmt.Fprintf(&b, "# Made by troupe scenario from-trial: each agent's recorded answers, in order.\ndescription: %s\nscripts:\n", q(description))
	for _, agent := range slices.Sorted(mapsKeys(byAgent)) {
		fmt.Fprintf(&b, "  %s:\n", q(agent))
		for _, c := range byAgent[agent] {
			a := modelcall.AnswerOf(c)
			fmt.Fprintf(&b, "    - name: %s\n", q(fmt.Sprintf("call %d", c.N)))
			if role := lastRole(c); role != "" {
				fmt.Fprintf(&b, "      match: {role: %s}\n", q(role))
			}
			if a.Failed {
				fmt.Fprintf(&b, "      error: {status: %d, message: %s}\n", max(a.Status, 500), q(fmt.Sprintf("the recorded call failed (%d): %s", a.Status, c.Error)))
				continue
			}
			if a.Text != "" || len(a.ToolCalls) == 0 {
				fmt.Fprintf(&b, "      reply: %s\n", q(literal(a.Text)))
			}
			if len(a.ToolCalls) > 0 {
				b.WriteString("      tool_calls:\n")
				for _, tc := range a.ToolCalls {
					args, _ := json.Marshal(escapeArgs(tc.Arguments, literal))
					fmt.Fprintf(&b, "        - name: %s\n          arguments: %s\n", q(tc.Name), args)
				}
			}
			if u := a.Usage; u != (modelcall.Usage{}) {
				fmt.Fprintf(&b, "      usage: {input_tokens: %d, output_tokens: %d", u.Input, u.Output)
				if u.CachedReported {
					fmt.Fprintf(&b, ", cached_tokens: %d", u.Cached)
				}
				if u.Reasoning > 0 && u.Reasoning <= u.Output {
					fmt.Fprintf(&b, ", reasoning_tokens: %d", u.Reasoning)
				}
				b.WriteString("}\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// escapeTemplate keeps text literal through the scenario's templates.
func escapeTemplate(s string) string {
	return strings.ReplaceAll(s, "{{", `{{"{{"}}`)
}

// escapeArgs keeps a tool call's arguments literal, each string through
// literal.
func escapeArgs(v any, literal func(string) string) any {
	switch v := v.(type) {
	case string:
		return literal(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = escapeArgs(x, literal)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = escapeArgs(x, literal)
		}
		return out
	}
	return v
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
