package llm

import "encoding/json"

// This file is the mock's answers in OpenAI's Responses API (POST
// /v1/responses; package modelcall reads its requests and meters its
// answers). The wire format is the official SDK's
// (github.com/openai/openai-go/v3/responses): an answer is a response
// object whose output holds message and function_call items and whose
// usage has input_tokens (cached ones included,
// input_tokens_details.cached_tokens) and output_tokens (reasoning
// included, output_tokens_details.reasoning_tokens). A stream is a
// sequence of typed events that ends with response.completed carrying the
// whole response and its usage; there is no [DONE].

// responsesUsage is the answer's usage in the Responses API's shape. As in
// the other shapes, a cached count is given only when the script reports one.
func (a mockAnswer) responsesUsage() map[string]any {
	u := map[string]any{"input_tokens": a.usage.Input, "output_tokens": a.usage.Output, "total_tokens": a.usage.Input + a.usage.Output,
		"output_tokens_details": map[string]any{"reasoning_tokens": a.usage.Reasoning}}
	if a.usage.CachedReported {
		u["input_tokens_details"] = map[string]any{"cached_tokens": a.usage.Cached}
	}
	return u
}

// response is a response object; usage is nil until it is complete.
func (a mockAnswer) response(status string, output []any, usage any) map[string]any {
	return map[string]any{"id": "resp_" + a.id, "object": "response", "created_at": a.created, "status": status, "model": a.model,
		"output": output, "usage": usage, "error": nil, "incomplete_details": nil, "instructions": nil, "metadata": map[string]any{},
		"parallel_tool_calls": true, "temperature": 1, "top_p": 1, "tool_choice": "auto", "tools": []any{}}
}

// hasMessage says whether the answer has a message item: when it has text,
// or nothing else to say.
func (a mockAnswer) hasMessage() bool { return a.text != "" || len(a.calls) == 0 }

func (a mockAnswer) responsesMessage(status string, content []any) map[string]any {
	return map[string]any{"id": "msg_" + a.id, "type": "message", "status": status, "role": "assistant", "content": content}
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

func responsesFunctionCall(c renderedCall, status, args string) map[string]any {
	return map[string]any{"id": "fc_" + c.id, "type": "function_call", "status": status, "call_id": c.id, "name": c.name, "arguments": args}
}

// responsesOutput is the answer's output items: its message, then its
// function calls.
func (a mockAnswer) responsesOutput() []any {
	out := []any{}
	if a.hasMessage() {
		out = append(out, a.responsesMessage("completed", []any{outputText(a.text)}))
	}
	for _, c := range a.calls {
		out = append(out, responsesFunctionCall(c, "completed", string(c.args)))
	}
	return out
}

func (a mockAnswer) responsesJSON() []byte {
	b, _ := json.Marshal(a.response("completed", a.responsesOutput(), a.responsesUsage()))
	return b
}

// responsesEvents writes the answer as a Responses event stream, its text
// in n deltas:
//
//	response.created, response.in_progress,
//	for the text: response.output_item.added (message), response.content_part.added,
//	  response.output_text.delta × n, response.output_text.done,
//	  response.content_part.done, response.output_item.done;
//	for each tool call: response.output_item.added (function_call),
//	  response.function_call_arguments.delta, response.function_call_arguments.done,
//	  response.output_item.done;
//	response.completed, with the whole response and its usage.
func (a mockAnswer) responsesEvents(n int) [][]byte {
	var out [][]byte
	sse := func(typ string, ev map[string]any) {
		ev["type"], ev["sequence_number"] = typ, len(out)
		b, _ := json.Marshal(ev)
		out = append(out, []byte("event: "+typ+"\ndata: "+string(b)+"\n\n"))
	}
	sse("response.created", map[string]any{"response": a.response("in_progress", []any{}, nil)})
	sse("response.in_progress", map[string]any{"response": a.response("in_progress", []any{}, nil)})
	index := 0
	if a.hasMessage() {
		id := "msg_" + a.id
		sse("response.output_item.added", map[string]any{"output_index": index, "item": a.responsesMessage("in_progress", []any{})})
		sse("response.content_part.added", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "part": outputText("")})
		for _, p := range split(a.text, n) {
			sse("response.output_text.delta", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "delta": p, "logprobs": []any{}})
		}
		sse("response.output_text.done", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "text": a.text, "logprobs": []any{}})
		sse("response.content_part.done", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "part": outputText(a.text)})
		sse("response.output_item.done", map[string]any{"output_index": index, "item": a.responsesMessage("completed", []any{outputText(a.text)})})
		index++
	}
	for _, c := range a.calls {
		id := "fc_" + c.id
		sse("response.output_item.added", map[string]any{"output_index": index, "item": responsesFunctionCall(c, "in_progress", "")})
		sse("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": index, "delta": string(c.args)})
		sse("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": index, "arguments": string(c.args)})
		sse("response.output_item.done", map[string]any{"output_index": index, "item": responsesFunctionCall(c, "completed", string(c.args))})
		index++
	}
	sse("response.completed", map[string]any{"response": a.response("completed", a.responsesOutput(), a.responsesUsage())})
	return out
}
