package modelcall

import (
	"bytes"
	"encoding/json"
)

// Usage is what one call consumed, normalised across wire formats: Input
// counts every input token, cached ones included (Anthropic's input_tokens
// plus cache reads and cache writes); Cached is the part read from cache.
// Reasoning is the part of Output the model spent reasoning, as OpenAI
// reports it (0 when not reported); it is priced as output.
type Usage struct {
	Input, Cached, Output int64
	Reasoning             int64
	// CachedReported is false when the upstream gave no cached count, so
	// Cached was estimated from the price's cache_read_rate.
	CachedReported bool
}

// wireUsage is the union of the APIs' usage objects.
type wireUsage struct {
	// OpenAI chat completions
	PromptTokens        *int64 `json:"prompt_tokens"`
	CompletionTokens    *int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	// Anthropic, and OpenAI Responses for input_tokens and output_tokens
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	// OpenAI Responses
	InputTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// merge folds one usage object into u. Streams report usage in pieces
// (Anthropic: input at message_start, cumulative output at message_delta),
// so each field keeps the largest value seen.
func (u *Usage) merge(api API, w wireUsage) {
	switch api {
	case Anthropic:
		if w.InputTokens != nil || w.CacheReadInputTokens != nil || w.CacheCreationInputTokens != nil {
			u.Input = max(u.Input, val(w.InputTokens)+val(w.CacheReadInputTokens)+val(w.CacheCreationInputTokens))
		}
		if w.CacheReadInputTokens != nil {
			u.Cached, u.CachedReported = max(u.Cached, *w.CacheReadInputTokens), true
		}
		u.Output = max(u.Output, val(w.OutputTokens))
	case OpenAIResponses:
		// input_tokens counts cached input; output_tokens counts reasoning.
		u.Input = max(u.Input, val(w.InputTokens))
		u.Output = max(u.Output, val(w.OutputTokens))
		if d := w.InputTokensDetails; d != nil && d.CachedTokens != nil {
			u.Cached, u.CachedReported = max(u.Cached, *d.CachedTokens), true
		}
		if d := w.OutputTokensDetails; d != nil {
			u.Reasoning = max(u.Reasoning, val(d.ReasoningTokens))
		}
	default:
		u.Input = max(u.Input, val(w.PromptTokens))
		u.Output = max(u.Output, val(w.CompletionTokens))
		if d := w.PromptTokensDetails; d != nil && d.CachedTokens != nil {
			u.Cached, u.CachedReported = max(u.Cached, *d.CachedTokens), true
		}
		if d := w.CompletionTokensDetails; d != nil {
			u.Reasoning = max(u.Reasoning, val(d.ReasoningTokens))
		}
	}
}

// ResponseUsage reads the usage of a whole (non-streamed) answer body;
// false when it has none.
func ResponseUsage(api API, body []byte) (Usage, bool) {
	var r struct {
		Usage *wireUsage `json:"usage"`
	}
	if json.Unmarshal(body, &r) != nil || r.Usage == nil {
		return Usage{}, false
	}
	var u Usage
	u.merge(api, *r.Usage)
	return u, true
}

// streamEvent is what the meter needs from one server-sent event.
type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Usage *wireUsage `json:"usage"`
	} `json:"message"`
	Usage *wireUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// InspectEvent reads one server-sent event of a streamed answer (its
// lines, up to the blank line that ends it) as the gateway meters it: it
// folds the usage the event reports into u, and says whether the event
// ends the stream ([DONE] for OpenAI, message_stop for Anthropic, a
// terminal response event for OpenAI Responses) and, for an error event,
// its error ("type: message").
func InspectEvent(api API, event []byte, u *Usage) (done bool, errMsg string) {
	if api == OpenAIResponses {
		return inspectResponsesEvent(event, u)
	}
	for line := range bytes.Lines(event) {
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if bytes.Equal(data, []byte("[DONE]")) {
			return true, ""
		}
		var ev streamEvent
		if json.Unmarshal(data, &ev) != nil {
			continue
		}
		if ev.Usage != nil {
			u.merge(api, *ev.Usage)
		}
		if ev.Message != nil && ev.Message.Usage != nil {
			u.merge(api, *ev.Message.Usage)
		}
		if ev.Error != nil {
			errMsg = ev.Error.Type + ": " + ev.Error.Message
		}
		if ev.Type == "message_stop" {
			done = true
		}
	}
	return done, errMsg
}

// responsesEvent is what the meter needs from one Responses stream event.
// A Responses stream is a sequence of typed events that ends with
// response.completed (or response.incomplete or response.failed) carrying
// the whole response and its usage; there is no [DONE].
type responsesEvent struct {
	Type     string `json:"type"`
	Response *struct {
		Usage *wireUsage `json:"usage"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"response"`
	// Code and Message are an error event's.
	Code    string `json:"code"`
	Message string `json:"message"`
}

// inspectResponsesEvent reads a Responses stream event: usage in the
// terminal event's response, the end of the stream, and errors (an error
// event, or a failed response).
func inspectResponsesEvent(event []byte, u *Usage) (done bool, errMsg string) {
	for line := range bytes.Lines(event) {
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if bytes.Equal(data, []byte("[DONE]")) { // not OpenAI's, but some compatible servers'
			return true, ""
		}
		var ev responsesEvent
		if json.Unmarshal(data, &ev) != nil {
			continue
		}
		if r := ev.Response; r != nil {
			if r.Usage != nil {
				u.merge(OpenAIResponses, *r.Usage)
			}
			if e := r.Error; e != nil && ev.Type == "response.failed" {
				errMsg = e.Code + ": " + e.Message
			}
		}
		switch ev.Type {
		case "error":
			errMsg = ev.Code + ": " + ev.Message
		case "response.completed", "response.incomplete", "response.failed":
			done = true
		}
	}
	return done, errMsg
}
