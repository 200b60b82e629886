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
	req, err := modelcall.ParseRequest(c.API, c.Request)
	if err != nil {
		return request{}
	}
	r := request{tools: req.Tools()}
	switch c.API {
	case modelcall.Anthropic:
		r.items = anthropicItems(req)
	case modelcall.OpenAIResponses:
		r.items = responsesItems(req)
	default: // chat completions
		for _, m := range req.Messages() {
			it := item{role: role(m.Role), text: text(m.Content), callID: m.ToolCallID, key: string(m.Raw)}
			for _, tc := range m.ToolCalls {
				it.calls = append(it.calls, callRef{id: tc.ID, name: tc.Name, args: tc.Args()})
			}
			r.items = append(r.items, it)
		}
	}
	return r
}

// anthropicItems are Anthropic's system and messages: a message's tool
// results are items of their own, before what the message says.
func anthropicItems(req modelcall.Request) []item {
	var items []item
	if sys := req.System(); sys != nil {
		items = append(items, item{role: SourceSystem, text: text(*sys), key: "system:" + string(sys.Raw)})
	}
	for _, m := range req.Messages() {
		key := m.Role + ":" + string(m.Content.Raw)
		if !blocks(m.Content) {
			items = append(items, item{role: role(m.Role), text: text(m.Content), key: key})
			continue
		}
		it := item{role: role(m.Role), key: key}
		var texts []string
		for i, b := range m.Content.Parts {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_use":
				it.calls = append(it.calls, callRef{id: b.Call.ID, name: b.Call.Name, args: b.Call.Args()})
			case "tool_result":
				items = append(items, item{role: "tool", text: text(b.Content), callID: b.CallID, key: key + "#" + strconv.Itoa(i)})
			}
		}
		if len(texts) > 0 || len(it.calls) > 0 {
			it.text = strings.Join(texts, "\n")
			items = append(items, it)
		}
	}
	return items
}

// blocks says whether an Anthropic content is read as blocks: a list of
// well-formed blocks, or none (null).
func blocks(c modelcall.Content) bool {
	return c.IsList && !c.Malformed() && !c.BadNames() || string(c.Raw) == "null"
}

// responsesItems are the Responses API's instructions and input items:
// messages, function calls and their outputs (other items, reasoning,
// are left out); an input given as text is the user's.
func responsesItems(req modelcall.Request) []item {
	var items []item
	if ins := req.System(); ins != nil {
		items = append(items, item{role: SourceSystem, text: text(*ins), key: "system:" + string(ins.Raw)})
	}
	for _, m := range req.Messages() {
		key := string(m.Raw)
		switch {
		case m.Whole:
			items = append(items, item{role: SourceUser, text: text(m.Content), key: "user:" + key})
		case m.Type == "function_call":
			call := modelcall.ToolUse{ID: m.CallID, Name: m.Name, Arguments: m.Arguments}
			items = append(items, item{role: "assistant", calls: []callRef{{id: call.ID, name: call.Name, args: call.Args()}}, key: key})
		case m.Type == "function_call_output":
			items = append(items, item{role: "tool", text: text(m.Output), callID: m.CallID, key: key})
		case m.Type == "message" || m.Type == "" && m.Role != "":
			items = append(items, item{role: role(m.Role), text: text(m.Content), key: key})
		}
	}
	return items
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
// that is not text is named in brackets, [image]); a content that is
// neither is shown as sent.
func text(c modelcall.Content) string {
	switch {
	case c.IsText:
		return c.Text
	case !c.IsList || c.Malformed():
		if len(c.Raw) == 0 || string(c.Raw) == "null" {
			return ""
		}
		return string(c.Raw)
	}
	var out []string
	for _, p := range c.Parts {
		switch p.Type {
		case "text", "input_text", "output_text", "":
			out = append(out, p.Text)
		default:
			out = append(out, "["+p.Type+"]")
		}
	}
	return strings.Join(out, "\n")
}
