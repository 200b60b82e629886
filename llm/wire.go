package llm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// writeError answers in the error shape of the API that was called, so an
// SDK raises its usual typed error.
func writeError(w http.ResponseWriter, api API, status int, errType, message string) {
	b := errorBody(api, errType, message)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// errorBody is an error in the shape the API's SDKs parse.
func errorBody(api API, errType, message string) []byte {
	var body any
	if api == Anthropic {
		body = map[string]any{"type": "error", "error": map[string]any{"type": errType, "message": message}}
	} else {
		body = map[string]any{"error": map[string]any{"message": message, "type": errType, "code": errType, "param": nil}}
	}
	b, _ := json.Marshal(body)
	return b
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

// responseUsage reads the usage of a whole (non-streamed) response body.
func responseUsage(api API, body []byte) (Usage, bool) {
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

// inspectEvent updates a call from one SSE event's data lines: usage, the
// end of the stream ([DONE] for OpenAI, message_stop for Anthropic, a
// terminal response event for OpenAI Responses), and an error event.
func inspectEvent(api API, event []byte, u *Usage) (done bool, errMsg string) {
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
