package modelcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Prompt is what a scripted model reads of a request: its system prompt
// and last user message, to choose a script's step; its last message, to
// check the step; and the texts of its whole input, to estimate its
// tokens.
type Prompt struct {
	// LastRole is the last message's role: user, assistant, system (a
	// developer message's too) or tool (a tool's result). LastText is its
	// text.
	LastRole, LastText string
	// System is the system prompt: Anthropic's system, the Responses API's
	// instructions, then the text of each system or developer message, a
	// line each; "" when there is none.
	System string
	// LastUser is the text of the last message of the user's role (a
	// tool's result is not one, in any format: an Anthropic user message
	// that carries a tool_result is the tool's); "" when there is none.
	LastUser string
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
	system := []string{p.Texts[0]}
	for _, msg := range req.Messages {
		content := ParseContent(msg.Content)
		text := content.Flat()
		p.Texts = append(p.Texts, text)
		role := msg.Role
		if api == Anthropic && role == "user" && content.Has("tool_result") {
			role = "tool"
		}
		switch role {
		case "system", "developer":
			system = append(system, text)
		case "user":
			p.LastUser = text
		}
		p.LastRole, p.LastText = role, text
	}
	p.System = joinLines(system)
	return p, nil
}

// joinLines joins the texts that are not empty, a line each.
func joinLines(texts []string) string {
	return strings.Join(slices.DeleteFunc(texts, func(s string) bool { return s == "" }), "\n")
}

// readResponsesPrompt is ReadPrompt for the Responses API: the last input
// item's role and text (a function_call_output is the tool's; a developer
// message is the system's), the instructions and system or developer
// messages, the last user message, and the texts of the instructions and
// of every item.
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
	p := Prompt{Texts: []string{flatText(req.Instructions)}, System: flatText(req.Instructions)}
	var text string
	if json.Unmarshal(input, &text) == nil {
		p.LastRole, p.LastText, p.LastUser = "user", text, text
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
	system := []string{p.System}
	for _, it := range items {
		content := flatText(it.Content)
		p.Texts = append(p.Texts, content, flatText(it.Output), flatText(it.Name), flatText(it.Arguments))
		switch {
		case strings.HasSuffix(it.Type, "_output"):
		case it.Role == "system" || it.Role == "developer":
			system = append(system, content)
		case it.Role == "user":
			p.LastUser = content
		}
	}
	p.System = joinLines(system)
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
