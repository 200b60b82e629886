package atif

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/troupebench/troupe/modelcall"
)

// item is one message of a request, whatever its wire format: role is
// system, user, assistant or tool.
type item struct {
	role, text string
	// calls are an assistant message's tool calls.
	calls []callRef
	// callID is the tool call a tool result answers.
	callID string
	// key identifies the item across requests.
	key string
}

type callRef struct {
	id, name string
	args     any
}

type request struct {
	items []item
	tools json.RawMessage
}

// parseRequest reads a recorded request's messages in its format: chat
// completions' messages, Anthropic's system and messages, the Responses
// API's instructions and input.
func parseRequest(c modelcall.Call) request {
	var req map[string]json.RawMessage
	if json.Unmarshal(c.Request, &req) != nil {
		return request{}
	}
	r := request{tools: req["tools"]}
	switch c.API {
	case modelcall.Anthropic:
		if sys := req["system"]; len(sys) > 0 && string(sys) != "null" {
			r.items = append(r.items, item{role: SourceSystem, text: text(sys), key: "system:" + string(sys)})
		}
		var msgs []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(req["messages"], &msgs)
		for _, m := range msgs {
			key := m.Role + ":" + string(m.Content)
			var blocks []struct {
				Type      string          `json:"type"`
				Text      string          `json:"text"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Input     any             `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			}
			if json.Unmarshal(m.Content, &blocks) != nil {
				r.items = append(r.items, item{role: role(m.Role), text: text(m.Content), key: key})
				continue
			}
			it := item{role: role(m.Role), key: key}
			var texts []string
			for i, b := range blocks {
				switch b.Type {
				case "text":
					texts = append(texts, b.Text)
				case "tool_use":
					it.calls = append(it.calls, callRef{id: b.ID, name: b.Name, args: b.Input})
				case "tool_result":
					r.items = append(r.items, item{role: "tool", text: text(b.Content), callID: b.ToolUseID, key: key + "#" + strconv.Itoa(i)})
				}
			}
			if len(texts) > 0 || len(it.calls) > 0 {
				it.text = strings.Join(texts, "\n")
				r.items = append(r.items, it)
			}
		}
	case modelcall.OpenAIResponses:
		if ins := req["instructions"]; len(ins) > 0 && string(ins) != "null" {
			r.items = append(r.items, item{role: SourceSystem, text: text(ins), key: "system:" + string(ins)})
		}
		in := req["input"]
		var list []json.RawMessage
		if json.Unmarshal(in, &list) != nil {
			if len(in) > 0 {
				r.items = append(r.items, item{role: SourceUser, text: text(in), key: "user:" + string(in)})
			}
			break
		}
		for _, raw := range list {
			var m struct {
				Type      string          `json:"type"`
				Role      string          `json:"role"`
				Content   json.RawMessage `json:"content"`
				CallID    string          `json:"call_id"`
				Name      string          `json:"name"`
				Arguments string          `json:"arguments"`
				Output    json.RawMessage `json:"output"`
			}
			json.Unmarshal(raw, &m)
			key := string(raw)
			switch {
			case m.Type == "function_call":
				r.items = append(r.items, item{role: "assistant", calls: []callRef{{id: m.CallID, name: m.Name, args: jsonArgs(m.Arguments)}}, key: key})
			case m.Type == "function_call_output":
				r.items = append(r.items, item{role: "tool", text: text(m.Output), callID: m.CallID, key: key})
			case m.Type == "message" || m.Type == "" && m.Role != "":
				r.items = append(r.items, item{role: role(m.Role), text: text(m.Content), key: key})
			}
		}
	default: // chat completions
		var msgs []json.RawMessage
		json.Unmarshal(req["messages"], &msgs)
		for _, raw := range msgs {
			var m struct {
				Role      string          `json:"role"`
				Content   json.RawMessage `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
				ToolCallID string `json:"tool_call_id"`
			}
			json.Unmarshal(raw, &m)
			it := item{role: role(m.Role), text: text(m.Content), callID: m.ToolCallID, key: string(raw)}
			for _, tc := range m.ToolCalls {
				it.calls = append(it.calls, callRef{id: tc.ID, name: tc.Function.Name, args: jsonArgs(tc.Function.Arguments)})
			}
			r.items = append(r.items, it)
		}
	}
	return r
}

// role maps a wire format's role to an item's.
func role(r string) string {
	switch r {
	case "system", "developer":
		return SourceSystem
	case "assistant", "model":
		return "assistant"
	case "tool", "function":
		return "tool"
	}
	return SourceUser
}

// text is a content's text: a string, or the text of its parts (a part
// that is not text is named in brackets, [image]).
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		if len(raw) == 0 || string(raw) == "null" {
			return ""
		}
		return string(raw)
	}
	var out []string
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text", "":
			out = append(out, p.Text)
		default:
			out = append(out, "["+p.Type+"]")
		}
	}
	return strings.Join(out, "\n")
}

func jsonArgs(s string) any {
	if s == "" {
		return map[string]any{}
	}
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	return v
}
