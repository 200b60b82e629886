package modelcall

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
)

// An Answer is what a recorded call was answered, whatever its wire
// format: the text, the tool calls, the usage. A mock scenario plays it
// back; the viewer and the ATIF export show it.
type Answer struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
	// Failed: the call was answered with an error (Status).
	Failed bool
	Status int
}

// ToolCall is a tool call an answer asks for: the tool's name and its
// arguments, decoded (DecodeArguments).
type ToolCall struct {
	Name      string
	Arguments any
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
	var s streamed
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
			s.chatChunk([]byte(data))
		case Anthropic:
			s.anthropicEvent([]byte(data))
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
	a.Text = s.text.String()
	for _, p := range s.calls {
		if p.name != "" {
			a.ToolCalls = append(a.ToolCalls, ToolCall{Name: p.name, Arguments: DecodeArguments(p.args.String())})
		}
	}
	return withUsage(a, c)
}

// streamed is a streamed answer's text and tool calls as its events
// bring them, a piece at a time.
type streamed struct {
	text  strings.Builder
	calls []*partialCall
}

type partialCall struct {
	name string
	args strings.Builder
}

func (s *streamed) call(i int) *partialCall {
	for len(s.calls) <= i {
		s.calls = append(s.calls, &partialCall{})
	}
	return s.calls[i]
}

// chatChunk reads a chat completions chunk: text and tool call deltas.
func (s *streamed) chatChunk(data []byte) {
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
	json.Unmarshal(data, &chunk)
	for _, ch := range chunk.Choices {
		s.text.WriteString(ch.Delta.Content)
		for _, tc := range ch.Delta.ToolCalls {
			p := s.call(tc.Index)
			if tc.Function.Name != "" {
				p.name = tc.Function.Name
			}
			p.args.WriteString(tc.Function.Arguments)
		}
	}
}

// anthropicEvent reads an Anthropic stream event: a tool_use block's
// start, text and input deltas.
func (s *streamed) anthropicEvent(data []byte) {
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
	json.Unmarshal(data, &e)
	switch {
	case e.Type == "content_block_start" && e.Block.Type == "tool_use":
		s.call(e.Index).name = e.Block.Name
	case e.Type == "content_block_delta" && e.Delta.Type == "text_delta":
		s.text.WriteString(e.Delta.Text)
	case e.Type == "content_block_delta" && e.Delta.Type == "input_json_delta":
		s.call(e.Index).args.WriteString(e.Delta.PartialJSON)
	}
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
			InspectEvent(c.API, append(event, '\n'), &u)
			event = event[:0]
		}
	}
	if len(event) > 0 {
		InspectEvent(c.API, append(event, '\n'), &u)
	}
	if u != (Usage{}) {
		a.Usage = u
	}
	return a
}

// fromBody reads a plain answer.
func (a *Answer) fromBody(api API, body []byte) {
	a.Usage, _ = ResponseUsage(api, body)
	switch api {
	case OpenAI:
		a.fromChat(body)
	case Anthropic:
		a.fromMessage(body)
	case OpenAIResponses:
		a.fromResponse(body)
	}
}

// fromChat reads a chat completion: its first choice's message.
func (a *Answer) fromChat(body []byte) {
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
			a.ToolCalls = append(a.ToolCalls, ToolCall{Name: tc.Function.Name, Arguments: DecodeArguments(tc.Function.Arguments)})
		}
	}
}

// fromMessage reads an Anthropic message: its text and tool_use blocks.
func (a *Answer) fromMessage(body []byte) {
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
			a.ToolCalls = append(a.ToolCalls, ToolCall{Name: b.Name, Arguments: DecodeArguments(string(b.Input))})
		}
	}
}

// fromResponse reads a Responses response: its message items' text and
// its function calls.
func (a *Answer) fromResponse(body []byte) {
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
			a.ToolCalls = append(a.ToolCalls, ToolCall{Name: o.Name, Arguments: DecodeArguments(o.Args)})
		}
	}
}
