package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// An Answer is what a recorded call was answered, whatever its wire
// format: the text, the tool calls, the usage. A mock scenario plays it
// back.
type Answer struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
	// Failed: the call was answered with an error (Status).
	Failed bool
	Status int
}

// AnswerOf reads a recorded call's answer: a plain answer's JSON or a
// stream's events, in the call's format.
func AnswerOf(c Call) Answer {
	a := Answer{Status: c.Status, Failed: c.Status >= 400 || c.Status == 0}
	if a.Failed {
		return a
	}
	if !c.Stream {
		a.fromBody(c.API, c.Answer)
		return a
	}
	// A stream's events: each data line is a JSON event.
	type partial struct {
		name string
		args strings.Builder
	}
	var calls []*partial
	callAt := func(i int) *partial {
		for len(calls) <= i {
			calls = append(calls, &partial{})
		}
		return calls[i]
	}
	var text strings.Builder
	sc := bufio.NewScanner(strings.NewReader(c.AnswerText))
	sc.Buffer(make([]byte, 64<<10), maxRecordLine)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		data = strings.TrimSpace(data)
		if !ok || data == "" || data == "[DONE]" {
			continue
		}
		var ev map[string]json.RawMessage
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		switch c.API {
		case OpenAI:
			var chunk struct {
				Choices []struct {
					Delta struct {
						Content   string `json:"content"`
						ToolCalls []struct {
							Index    int `json:"index"`
							Function struct {
								Name      string `json:"name"`
								Arguments string `json:"arguments"`
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"delta"`
				} `json:"choices"`
			}
			json.Unmarshal([]byte(data), &chunk)
			for _, ch := range chunk.Choices {
				text.WriteString(ch.Delta.Content)
				for _, tc := range ch.Delta.ToolCalls {
					p := callAt(tc.Index)
					if tc.Function.Name != "" {
						p.name = tc.Function.Name
					}
					p.args.WriteString(tc.Function.Arguments)
				}
			}
		case Anthropic:
			var e struct {
				Type  string `json:"type"`
				Index int    `json:"index"`
				Block struct {
					Type string `json:"type"`
					Name string `json:"name"`
				} `json:"content_block"`
				Delta struct {
					Type        string `json:"type"`
					Text        string `json:"text"`
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			json.Unmarshal([]byte(data), &e)
			switch {
			case e.Type == "content_block_start" && e.Block.Type == "tool_use":
				callAt(e.Index).name = e.Block.Name
			case e.Type == "content_block_delta" && e.Delta.Type == "text_delta":
				text.WriteString(e.Delta.Text)
			case e.Type == "content_block_delta" && e.Delta.Type == "input_json_delta":
				callAt(e.Index).args.WriteString(e.Delta.PartialJSON)
			}
		case OpenAIResponses:
			var e struct {
				Type     string          `json:"type"`
				Response json.RawMessage `json:"response"`
			}
			json.Unmarshal([]byte(data), &e)
			if e.Type == "response.completed" {
				a.fromBody(c.API, e.Response) // the whole response is in it
				return withUsage(a, c)
			}
		}
	}
	a.Text = text.String()
	for _, p := range calls {
		if p.name != "" {
			a.ToolCalls = append(a.ToolCalls, ToolCall{Name: p.name, Arguments: arguments(p.args.String())})
		}
	}
	return withUsage(a, c)
}

// withUsage adds a stream's usage, read as the meter reads it.
func withUsage(a Answer, c Call) Answer {
	var u Usage
	sc := bufio.NewScanner(strings.NewReader(c.AnswerText))
	sc.Buffer(make([]byte, 64<<10), maxRecordLine)
	var event []byte
	for sc.Scan() {
		line := sc.Bytes()
		event = append(event, line...)
		event = append(event, '\n')
		if len(bytes.TrimSpace(line)) == 0 {
			inspectEvent(c.API, append(event, '\n'), &u)
			event = event[:0]
		}
	}
	if len(event) > 0 {
		inspectEvent(c.API, append(event, '\n'), &u)
	}
	if u != (Usage{}) {
		a.Usage = u
	}
	return a
}

// fromBody reads a plain answer.
func (a *Answer) fromBody(api API, body []byte) {
	a.Usage, _ = responseUsage(api, body)
	switch api {
	case OpenAI:
		var r struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		json.Unmarshal(body, &r)
		if len(r.Choices) > 0 {
			m := r.Choices[0].Message
			if m.Content != nil {
				a.Text = *m.Content
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, ToolCall{Name: tc.Function.Name, Arguments: arguments(tc.Function.Arguments)})
			}
		}
	case Anthropic:
		var r struct {
			Content []struct {
				Type  string          `json:"type"`
				Text  string          `json:"text"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"content"`
		}
		json.Unmarshal(body, &r)
		for _, b := range r.Content {
			switch b.Type {
			case "text":
				a.Text += b.Text
			case "tool_use":
				a.ToolCalls = append(a.ToolCalls, ToolCall{Name: b.Name, Arguments: arguments(string(b.Input))})
			}
		}
	case OpenAIResponses:
		var r struct {
			Output []struct {
				Type    string `json:"type"`
				Name    string `json:"name"`
				Args    string `json:"arguments"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		json.Unmarshal(body, &r)
		for _, o := range r.Output {
			switch o.Type {
			case "message":
				for _, c := range o.Content {
					if c.Type == "output_text" {
						a.Text += c.Text
					}
				}
			case "function_call":
				a.ToolCalls = append(a.ToolCalls, ToolCall{Name: o.Name, Arguments: arguments(o.Args)})
			}
		}
	}
}

// arguments reads a tool call's JSON arguments, or keeps them as a string
// when they are not JSON.
func arguments(s string) any {
	var v any
	if s == "" {
		return map[string]any{}
	}
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	return v
}

// lastRole is the role of a recorded request's last message, for a
// scenario step's loose match.
func lastRole(c Call) string {
	var req map[string]json.RawMessage
	if json.Unmarshal(c.Request, &req) != nil {
		return ""
	}
	var items []struct {
		Role string `json:"role"`
		Type string `json:"type"`
	}
	for _, k := range []string{"messages", "input"} {
		if json.Unmarshal(req[k], &items) == nil && len(items) > 0 {
			last := items[len(items)-1]
			switch {
			case last.Type == "function_call_output":
				return "tool"
			case last.Role == "developer":
				return "system"
			}
			if c.API == Anthropic && last.Role == "user" && bytes.Contains(req[k], []byte(`"tool_result"`)) {
				var msgs []struct {
					Content json.RawMessage `json:"content"`
				}
				json.Unmarshal(req[k], &msgs)
				if bytes.Contains(msgs[len(msgs)-1].Content, []byte(`"tool_result"`)) {
					return "tool"
				}
			}
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
func WriteScenario(w io.Writer, description string, byAgent map[string][]Call, own []Same) error {
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
			a := AnswerOf(c)
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
			if u := a.Usage; u != (Usage{}) {
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
