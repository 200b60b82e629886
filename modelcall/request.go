package modelcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
)

// Request is a request body of one of the three APIs, read as one view.
// Fields are the body's top-level fields as sent, the form the gateway
// rewrites and a record splits; the methods read what they say, in the
// request's format:
//
//   - chat completions (OpenAI): messages, each {role, content} with an
//     assistant's tool_calls and a tool message's tool_call_id; the
//     system prompt is a message (role system or developer);
//   - messages (Anthropic): system apart, then messages whose content is
//     a text or blocks (text, tool_use, tool_result, image, …);
//   - the Responses API (OpenAI): instructions apart, then input, a text
//     or a list of items (messages, function_call, function_call_output,
//     reasoning, …).
type Request struct {
	API    API
	Fields map[string]json.RawMessage
}

// ParseRequest reads a request body; the error is the JSON decoder's when
// the body is not a JSON object, and says so when it is null (which the
// decoder reads as no object, with no error).
func ParseRequest(api API, body []byte) (Request, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil {
		return Request{}, err
	}
	if f == nil { // JSON's null decodes into no map, and no error
		return Request{}, errors.New("it is null")
	}
	return Request{API: api, Fields: f}, nil
}

// Model is the model the request names; "" when it names none.
func (r Request) Model() string {
	var s string
	json.Unmarshal(r.Fields["model"], &s)
	return s
}

// Stream says whether the request asks for a streamed answer.
func (r Request) Stream() bool { return isTrue(r.Fields["stream"]) }

// Background says whether a Responses request asks for a background
// response, which answers at once and is billed later.
func (r Request) Background() bool { return isTrue(r.Fields["background"]) }

func isTrue(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("true")) }

// System is the system prompt a request gives apart from its history:
// Anthropic's system (a text or text blocks), the Responses API's
// instructions. nil when it gives none (or null). Chat completions give
// theirs as a message.
func (r Request) System() *Content {
	key := "system"
	if r.API == OpenAIResponses {
		key = "instructions"
	}
	raw := r.Fields[key]
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	c := ParseContent(raw)
	return &c
}

// Messages are the request's history, in order: chat completions' and
// Anthropic's messages, the Responses API's input items. A Responses
// input that is not a list (a text) is one message of the user's, Whole.
// nil when the history is missing or is not a list.
func (r Request) Messages() []Message {
	if r.API != OpenAIResponses {
		return ParseMessages(r.Fields["messages"])
	}
	in := r.Fields["input"]
	if msgs, ok := parseList(in); ok {
		return msgs
	}
	if len(in) == 0 {
		return nil
	}
	return []Message{{Role: "user", Content: ParseContent(in), Raw: in, Whole: true}}
}

// Tools are the tools the request offers, as sent.
func (r Request) Tools() json.RawMessage { return r.Fields["tools"] }

// Message is one item of a request's history in any of the three formats,
// its fields those the formats give: a chat completions or Anthropic
// message ({role, content}, chat's tool_calls and tool_call_id), or a
// Responses input item ({type, role, content}, a function_call's name,
// arguments and call_id, a function_call_output's call_id and output).
type Message struct {
	// Role is as sent: system, developer, user, assistant, tool; "" for a
	// Responses item that has none (a function call, reasoning).
	Role string
	// Type is a Responses item's type (message, function_call,
	// function_call_output, custom_tool_call, reasoning, …); "" when it
	// has none.
	Type    string
	Content Content
	// ToolCalls are a chat completions assistant's tool calls; ToolCallID
	// the call a chat completions tool message answers. (Anthropic's are
	// parts of the content: tool_use and tool_result.)
	ToolCalls  []ToolUse
	ToolCallID string
	// Name and Arguments are a Responses function_call's tool and
	// arguments (JSON text); CallID the call a function_call or its
	// output names; Output a function_call_output's result.
	Name, Arguments, CallID string
	Output                  Content
	// Raw is the item as sent.
	Raw json.RawMessage
	// Malformed: the item is not an object, or its role or type is not a
	// string. BadFields: another of its fields has a type other than
	// these. What could be read of it is read all the same.
	Malformed, BadFields bool
	// Whole: a Responses input given as one value (a text) rather than as
	// items, taken as the user's message.
	Whole bool
}

// ToolUse is a tool call as a request carries it: its id, the tool's
// name, and its arguments as JSON text (chat completions' and the
// Responses API's arguments string, Anthropic's input object).
type ToolUse struct {
	ID, Name, Arguments string
}

// Args are the call's arguments, decoded (DecodeArguments).
func (u ToolUse) Args() any { return DecodeArguments(u.Arguments) }

// DecodeArguments reads a tool call's JSON arguments: an empty object
// when there are none, the text itself when it is not JSON.
func DecodeArguments(s string) any {
	var v any
	if s == "" {
		return map[string]any{}
	}
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	return v
}

// ParseMessages reads a list of history items; nil when raw is no list.
func ParseMessages(raw json.RawMessage) []Message {
	msgs, _ := parseList(raw)
	return msgs
}

func parseList(raw json.RawMessage) ([]Message, bool) {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, false
	}
	msgs := make([]Message, len(items))
	for i, it := range items {
		msgs[i] = ParseMessage(it)
	}
	return msgs, true
}

// ParseMessage reads one history item in any of the three formats.
func ParseMessage(raw json.RawMessage) Message {
	var m struct {
		Role       string          `json:"role"`
		Type       string          `json:"type"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		// Responses items.
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		CallID    string          `json:"call_id"`
		Output    json.RawMessage `json:"output"`
	}
	// A field of the wrong type is left out, and the rest read.
	err := json.Unmarshal(raw, &m)
	var head struct {
		Role string `json:"role"`
		Type string `json:"type"`
	}
	malformed := json.Unmarshal(raw, &head) != nil
	out := Message{Role: m.Role, Type: m.Type, Content: ParseContent(m.Content), ToolCallID: m.ToolCallID,
		Name: m.Name, Arguments: m.Arguments, CallID: m.CallID, Output: ParseContent(m.Output), Raw: raw,
		Malformed: malformed, BadFields: !malformed && err != nil}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolUse{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return out
}

// Content is what a message says, in any of the formats: a text, or a
// list of parts.
type Content struct {
	// Raw is the content as sent; empty when there is none.
	Raw json.RawMessage
	// Text is a plain text content's (IsText).
	Text   string
	IsText bool
	// Parts are a list's (IsList), in order.
	Parts  []Part
	IsList bool
}

// ParseContent reads a content: a text, a list of parts, or anything
// else, kept as Raw.
func ParseContent(raw json.RawMessage) Content {
	c := Content{Raw: raw}
	if v := bytes.TrimLeft(raw, " \t\r\n"); len(v) > 0 {
		switch v[0] {
		case '"':
			c.IsText = json.Unmarshal(raw, &c.Text) == nil
		case '[':
			c.Parts, c.IsList = parseParts(raw)
		}
	}
	return c
}

// Malformed says whether a part of the list is Malformed.
func (c Content) Malformed() bool {
	return slices.ContainsFunc(c.Parts, func(p Part) bool { return p.Malformed })
}

// BadNames says whether a part of the list names a tool, a call or its
// own id with other than a string (BadName, BadID).
func (c Content) BadNames() bool {
	return slices.ContainsFunc(c.Parts, func(p Part) bool { return p.BadName || p.BadID })
}

// Part is one part of a content: text (text, input_text, output_text), a
// tool call (Anthropic's tool_use), a tool's result (tool_result), or
// another kind (an image, thinking, …).
type Part struct {
	// Type is the part's type as sent.
	Type string
	// Text is the part's text, if it has one (HasText).
	Text    string
	HasText bool
	// Call is a tool_use part's call: its id, tool and input.
	Call ToolUse
	// CallID is the call a tool_result part answers; Content what it
	// holds (a text or parts, as a message's content).
	CallID  string
	Content Content
	// Raw is the part as sent.
	Raw json.RawMessage
	// Malformed: the part is not an object, or its type or text is not
	// a string. BadName: its name or tool_use_id is not a string; BadID:
	// its id is not (each then reads as "").
	Malformed, BadName, BadID bool
}

func parseParts(raw json.RawMessage) ([]Part, bool) {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, false
	}
	parts := make([]Part, len(items))
	for i, it := range items {
		parts[i] = parsePart(it)
	}
	return parts, true
}

func parsePart(raw json.RawMessage) Part {
	var b struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text"`
		ID        json.RawMessage `json:"id"`
		Name      json.RawMessage `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID json.RawMessage `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
	}
	err := json.Unmarshal(raw, &b)
	id, idOK := stringOf(b.ID)
	name, nameOK := stringOf(b.Name)
	callID, callOK := stringOf(b.ToolUseID)
	p := Part{Type: b.Type, Call: ToolUse{ID: id, Name: name, Arguments: string(b.Input)}, CallID: callID,
		Content: ParseContent(b.Content), Raw: raw, Malformed: err != nil, BadName: !nameOK || !callOK, BadID: !idOK}
	if b.Text != nil {
		p.Text, p.HasText = *b.Text, true
	}
	return p
}

// stringOf reads a string field: "" when it is absent or null, and false
// when it is not a string.
func stringOf(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 {
		return "", true
	}
	return s, json.Unmarshal(raw, &s) == nil
}

// LastOnly is a request body with nothing but the last item of its
// history (messages, or the Responses input list): all a scenario's step
// matches of it, kept small. A body that is not a JSON object is kept as
// it is.
func LastOnly(body json.RawMessage) json.RawMessage {
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return body
	}
	slim := map[string]json.RawMessage{}
	for _, k := range []string{"messages", "input"} {
		var items []json.RawMessage
		if json.Unmarshal(req[k], &items) == nil && len(items) > 0 {
			slim[k], _ = json.Marshal(items[len(items)-1:])
		}
	}
	out, _ := json.Marshal(slim)
	return out
}
