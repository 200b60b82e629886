package modelcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Prompt is what a scripted model reads of a request: its last message,
// to match a script's step, and the texts of its whole input, to estimate
// its tokens.
type Prompt struct {
	// LastRole is the last message's role: user, assistant, system (a
	// developer message's too) or tool (a tool's result). LastText is its
	// text.
	LastRole, LastText string
	// Texts are the input's texts: the system prompt's, then each
	// message's (a Responses item's content, output, name and arguments).
	Texts []string
}

// ReadPrompt reads a request body's prompt, or says why the request has
// none a model could answer.
func ReadPrompt(api API, body []byte) (Prompt, error) {
	if api == OpenAIResponses {
		return readResponsesPrompt(body)
	}
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return Prompt{}, fmt.Errorf("the mock cannot read the request: %v", err)
	}
	if len(req.Messages) == 0 {
		return Prompt{}, errors.New("the request has no messages")
	}
	p := Prompt{Texts: []string{flatText(req.System)}}
	for _, msg := range req.Messages {
		p.Texts = append(p.Texts, flatText(msg.Content))
	}
	last := req.Messages[len(req.Messages)-1]
	p.LastRole, p.LastText = last.Role, flatText(last.Content)
	if api == Anthropic && last.Role == "user" && ParseContent(last.Content).Has("tool_result") {
		p.LastRole = "tool"
	}
	return p, nil
}

// readResponsesPrompt is ReadPrompt for the Responses API: the last input
// item's role and text (a function_call_output is the tool's; a developer
// message is the system's), and the texts of the instructions and of
// every item.
func readResponsesPrompt(body []byte) (Prompt, error) {
	var req struct {
		Instructions json.RawMessage `json:"instructions"`
		Input        json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return Prompt{}, fmt.Errorf("the mock cannot read the request: %v", err)
	}
	input := bytes.TrimSpace(req.Input)
	if len(input) == 0 || bytes.Equal(input, []byte("null")) {
		return Prompt{}, errors.New("the request has no input")
	}
	p := Prompt{Texts: []string{flatText(req.Instructions)}}
	var text string
	if json.Unmarshal(input, &text) == nil {
		p.LastRole, p.LastText = "user", text
		p.Texts = append(p.Texts, text)
		return p, nil
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Output    json.RawMessage `json:"output"`
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(input, &items); err != nil {
		return Prompt{}, fmt.Errorf("the mock cannot read the request's input, neither text nor a list of items: %v", err)
	}
	if len(items) == 0 {
		return Prompt{}, errors.New("the request has no input")
	}
	for _, it := range items {
		p.Texts = append(p.Texts, flatText(it.Content), flatText(it.Output), flatText(it.Name), flatText(it.Arguments))
	}
	last := items[len(items)-1]
	switch {
	case strings.HasSuffix(last.Type, "_output"): // function_call_output, custom_tool_call_output, …
		p.LastRole, p.LastText = "tool", flatText(last.Output)
	case last.Role == "developer":
		p.LastRole, p.LastText = "system", flatText(last.Content)
	case last.Role != "":
		p.LastRole, p.LastText = last.Role, flatText(last.Content)
	default: // the model's own item: a function call, reasoning
		p.LastRole = "assistant"
	}
	return p, nil
}

func flatText(raw json.RawMessage) string { return ParseContent(raw).Flat() }

// Flat is the content's text as a scripted model reads it: a plain text,
// or the text of each part and of what each holds (a tool result's
// content), a line each; "" for a list with a malformed part.
func (c Content) Flat() string {
	if c.IsText {
		return c.Text
	}
	if !c.IsList || c.Malformed() {
		return ""
	}
	var parts []string
	for _, p := range c.Parts {
		if p.Text != "" {
			parts = append(parts, p.Text)
		}
		if t := p.Content.Flat(); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// Has says whether the content has a part of the type (a tool_result,
// an image).
func (c Content) Has(typ string) bool {
	for _, p := range c.Parts {
		if p.Type == typ {
			return true
		}
	}
	return false
}
