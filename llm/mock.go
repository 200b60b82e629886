package llm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// mockTransport answers mock endpoints' calls in process, from the calling
// agent's script. Its response bodies are plain readers that wait, cut or
// hang inside Read, so a mock call runs no goroutine of its own.
type mockTransport struct {
	now func() time.Time
}

func (m *mockTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c := callOf(r)
	cur := c.st.script
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	req, err := modelcall.ReadPrompt(c.api, body)
	if err != nil {
		return mockError(r, c.api, http.StatusBadRequest, "invalid_request_error", err.Error(), 0), nil
	}
	if c.countTokens { // the estimate an answer's usage would have; no step is taken
		b, _ := json.Marshal(map[string]int64{"input_tokens": estimateInput(req)})
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(b)),
			ContentLength: int64(len(b)), Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
	}
	step, n, err := cur.take(req)
	if es, ok := errors.AsType[*errScript](err); ok {
		c.harness, c.harnessClass = es.msg, es.code
		return mockError(r, c.api, http.StatusInternalServerError, es.code, es.msg, 0), nil
	}
	if err := wait(r.Context(), step.Delay); err != nil {
		return nil, err
	}
	if step.Hang {
		c.held.Store(true)
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	if e := step.Error; e != nil {
		msg := cmp.Or(e.Message, fmt.Sprintf("scripted error %d (scenario %s, step %q)", e.Status, cur.scenario.Name, step.Name))
		return mockError(r, c.api, e.Status, errorType(e.Status), msg, e.RetryAfter), nil
	}
	facts := cur.facts // a copy: calls of one agent may overlap
	facts.Last = req.LastText
	reply, err := cur.render(step.Reply, facts)
	if err != nil {
		c.harness, c.harnessClass = err.Error(), "mock_template_error"
		return mockError(r, c.api, http.StatusInternalServerError, "mock_template_error", err.Error(), 0), nil
	}
	var calls []renderedCall
	for i, tc := range step.ToolCalls {
		args, err := cur.renderArgs(tc.Arguments, facts)
		if err != nil {
			c.harness, c.harnessClass = err.Error(), "mock_template_error"
			return mockError(r, c.api, http.StatusInternalServerError, "mock_template_error", err.Error(), 0), nil
		}
		if args == nil {
			args = map[string]any{}
		}
		raw, _ := json.Marshal(args)
		calls = append(calls, renderedCall{id: fmt.Sprintf("call_%s_%d_%d", strings.ReplaceAll(cur.facts.Self.ID, "-", "_"), n, i), name: tc.Name, args: raw})
	}
	out := mockAnswer{
		id: fmt.Sprintf("mock-%s-%d", cur.facts.Self.ID, n), model: c.st.endpoint.Model, created: m.now().Unix(),
		text: reply, calls: calls, usage: estimateUsage(req, reply, calls, step.Usage),
	}
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: r, ProtoMajor: 1, ProtoMinor: 1}
	if !c.stream {
		b := out.json(c.api)
		resp.Header.Set("Content-Type", "application/json")
		resp.ContentLength = int64(len(b))
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return resp, nil
	}
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.ContentLength = -1
	resp.Body = &chunkReader{ctx: r.Context(), chunks: out.events(c.api, max(step.Chunks, 1)), gap: step.ChunkDelay, cutAfter: step.CutAfterChunks}
	return resp, nil
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mockError is an error response in the API's shape.
func mockError(r *http.Request, api modelcall.API, status int, typ, msg string, retryAfter time.Duration) *http.Response {
	rec := &headerRecorder{header: http.Header{}}
	writeError(rec, api, status, typ, msg)
	if retryAfter > 0 {
		rec.header.Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
	}
	return &http.Response{StatusCode: status, Header: rec.header, Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())), ContentLength: int64(rec.body.Len()), Request: r, ProtoMajor: 1, ProtoMinor: 1}
}

// headerRecorder is the smallest http.ResponseWriter: writeError writes
// into it so mock errors have the same shape as the gateway's.
type headerRecorder struct {
	header http.Header
	body   bytes.Buffer
}

func (h *headerRecorder) Header() http.Header         { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) { return h.body.Write(b) }
func (h *headerRecorder) WriteHeader(int)             {}

// estimateUsage gives deterministic token counts: about four characters a
// token, unless the step says otherwise.
func estimateUsage(req modelcall.Prompt, reply string, calls []renderedCall, override *StepUsage) modelcall.Usage {
	if override != nil {
		u := modelcall.Usage{Input: override.Input, Output: override.Output, Reasoning: override.Reasoning}
		if override.Cached != nil {
			u.Cached, u.CachedReported = *override.Cached, true
		}
		return u
	}
	out := len(reply)
	for _, c := range calls {
		out += len(c.name) + len(c.args)
	}
	return modelcall.Usage{Input: estimateInput(req), Output: max(int64((out+3)/4), 1)}
}

// textChars is what a text counts for the mock's estimate: its length
// with times and durations masked, as a replay compares requests, so that
// a harness that tells the model the time left ("59s", "1m0s") does not
// make a scripted trial's figures differ by when its calls were made.
func textChars(s string) int { return len(maskTimes(s)) }

// estimateInput is the input tokens of a request the script gives no usage
// for, and the mock's answer to count_tokens: about a token per four
// characters.
func estimateInput(req modelcall.Prompt) int64 {
	chars := 0
	for _, t := range req.Texts {
		chars += textChars(t)
	}
	return int64((chars + 3) / 4)
}

type renderedCall struct {
	id, name string
	args     json.RawMessage
}

// mockAnswer is one scripted answer, written in either API's shape.
type mockAnswer struct {
	id, model string
	created   int64
	text      string
	calls     []renderedCall
	usage     modelcall.Usage
}

func (a mockAnswer) openAIUsage() map[string]any {
	u := map[string]any{"prompt_tokens": a.usage.Input, "completion_tokens": a.usage.Output, "total_tokens": a.usage.Input + a.usage.Output}
	if a.usage.CachedReported {
		u["prompt_tokens_details"] = map[string]any{"cached_tokens": a.usage.Cached}
	}
	if a.usage.Reasoning > 0 {
		u["completion_tokens_details"] = map[string]any{"reasoning_tokens": a.usage.Reasoning}
	}
	return u
}

func (a mockAnswer) anthropicUsage(output int64) map[string]any {
	u := map[string]any{"input_tokens": a.usage.Input - a.usage.Cached, "output_tokens": output}
	if a.usage.CachedReported {
		u["cache_read_input_tokens"] = a.usage.Cached
	}
	return u
}

func (a mockAnswer) json(api modelcall.API) []byte {
	if api == modelcall.OpenAIResponses {
		return a.responsesJSON()
	}
	var body any
	if api == modelcall.Anthropic {
		content := []any{}
		if a.text != "" {
			content = append(content, map[string]any{"type": "text", "text": a.text})
		}
		for _, c := range a.calls {
			content = append(content, map[string]any{"type": "tool_use", "id": "toolu_" + c.id, "name": c.name, "input": c.args})
		}
		stop := "end_turn"
		if len(a.calls) > 0 {
			stop = "tool_use"
		}
		body = map[string]any{"id": "msg_" + a.id, "type": "message", "role": "assistant", "model": a.model, "content": content,
			"stop_reason": stop, "stop_sequence": nil, "usage": a.anthropicUsage(a.usage.Output)}
	} else {
		msg := map[string]any{"role": "assistant", "content": nil}
		if a.text != "" || len(a.calls) == 0 {
			msg["content"] = a.text
		}
		finish := "stop"
		if len(a.calls) > 0 {
			var tcs []any
			for _, c := range a.calls {
				tcs = append(tcs, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": string(c.args)}})
			}
			msg["tool_calls"], finish = tcs, "tool_calls"
		}
		body = map[string]any{"id": "chatcmpl-" + a.id, "object": "chat.completion", "created": a.created, "model": a.model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}}, "usage": a.openAIUsage()}
	}
	b, _ := json.Marshal(body)
	return b
}

// events writes the answer as server-sent events, the text split in n chunks.
func (a mockAnswer) events(api modelcall.API, n int) [][]byte {
	if api == modelcall.OpenAIResponses {
		return a.responsesEvents(n)
	}
	var out [][]byte
	sse := func(event string, v any) {
		b, _ := json.Marshal(v)
		if event != "" {
			out = append(out, []byte("event: "+event+"\ndata: "+string(b)+"\n\n"))
		} else {
			out = append(out, []byte("data: "+string(b)+"\n\n"))
		}
	}
	pieces := split(a.text, n)
	if api == modelcall.Anthropic {
		sse("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_" + a.id, "type": "message", "role": "assistant",
			"model": a.model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": a.anthropicUsage(1)}})
		index := 0
		if a.text != "" {
			sse("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, p := range pieces {
				sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": p}})
			}
			sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
			index++
		}
		for _, c := range a.calls {
			sse("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "tool_use", "id": "toolu_" + c.id, "name": c.name, "input": map[string]any{}}})
			sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(c.args)}})
			sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
			index++
		}
		stop := "end_turn"
		if len(a.calls) > 0 {
			stop = "tool_use"
		}
		sse("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": a.usage.Output}})
		sse("message_stop", map[string]any{"type": "message_stop"})
		return out
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-" + a.id, "object": "chat.completion.chunk", "created": a.created, "model": a.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	sse("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, p := range pieces {
		sse("", chunk(map[string]any{"content": p}, nil))
	}
	for i, c := range a.calls {
		sse("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": ""}}}}, nil))
		sse("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": string(c.args)}}}}, nil))
	}
	finish := "stop"
	if len(a.calls) > 0 {
		finish = "tool_calls"
	}
	sse("", chunk(map[string]any{}, finish))
	sse("", map[string]any{"id": "chatcmpl-" + a.id, "object": "chat.completion.chunk", "created": a.created, "model": a.model, "choices": []any{}, "usage": a.openAIUsage()})
	out = append(out, []byte("data: [DONE]\n\n"))
	return out
}

// split cuts s into about n pieces on rune boundaries.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	r := []rune(s)
	size := max((len(r)+n-1)/n, 1)
	var out []string
	for i := 0; i < len(r); i += size {
		out = append(out, string(r[i:min(i+size, len(r))]))
	}
	return out
}

// chunkReader serves prepared chunks, waiting gap between them, and cuts
// the stream after cutAfter chunks when set.
type chunkReader struct {
	ctx      context.Context
	chunks   [][]byte
	gap      time.Duration
	cutAfter int
	i        int
	cur      []byte
}

var errMockCut = errors.New("mock stream cut by its scenario")

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.cur) == 0 {
		if c.i == len(c.chunks) {
			return 0, io.EOF
		}
		if c.cutAfter > 0 && c.i >= c.cutAfter {
			return 0, errMockCut
		}
		if c.i > 0 {
			if err := wait(c.ctx, c.gap); err != nil {
				return 0, err
			}
		}
		c.cur = c.chunks[c.i]
		c.i++
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

func (c *chunkReader) Close() error { return nil }
