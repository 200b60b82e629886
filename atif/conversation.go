package atif

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// AgentInfo is who an agent was, from result.json (or relay/members.json
// while a trial has none).
type AgentInfo struct {
	ID, Role, Kind string
	// Endpoint is the model endpoint the agent called; empty if unknown.
	Endpoint string
	// Stack and StackDigest are the program it ran, if known.
	Stack, StackDigest string
	// Version is troupe's version, the agent system's version in ATIF.
	Version string
	// Usage is the gateway's totals; nil if unknown.
	Usage *modelcall.Totals
}

// FromConversation builds an agent's trajectory from its recorded calls,
// in order. meter, if not nil, finds the gateway's record of a call (its
// usage and cost, llm-calls.jsonl); without one a step's metrics are the
// answer's usage. The result has no step when calls is empty.
func FromConversation(agent AgentInfo, calls []modelcall.Call, meter func(modelcall.Call) (modelcall.Record, bool)) Trajectory {
	b := newBuilder()
	for _, c := range calls {
		b.call(c, meter)
	}
	return b.trajectory(agent)
}

func newBuilder() *builder { return &builder{seen: map[string]bool{}} }

// call adds one model call: the input its request added, then its step.
// Calls come in order, one at a time: a record read with modelcall.RecordReader
// is never held whole.
func (b *builder) call(c modelcall.Call, meter func(modelcall.Call) (modelcall.Record, bool)) {
	req := parseRequest(c)
	if b.tools == nil {
		b.tools = req.tools
	}
	for i, it := range req.items {
		b.input(it, i == 0, c)
	}
	b.agentStep(c, meter)
	b.calls++
}

// trajectory is the agent's trajectory from the calls added.
func (b *builder) trajectory(agent AgentInfo) Trajectory {
	t := Trajectory{
		SchemaVersion: SchemaVersion,
		TrajectoryID:  agent.ID,
		Agent: Agent{
			Name:            agentName(agent.ID, agent.Role),
			Version:         orDash(agent.Version),
			ModelName:       agent.Endpoint,
			ToolDefinitions: toolDefinitions(b.tools),
			Extra:           agentExtra(agent),
		},
		Steps: b.steps,
		Notes: "Rebuilt by troupe export atif from the agent's conversation record: each model call is one agent step " +
			"(llm_call_count 1); the input a request added to earlier ones is a user or system step, or an observation of the " +
			"agent step whose tool call it answers. The leading system prompt is shown as first sent; later versions of it " +
			"(troupe updates its time and budget lines) are not repeated.",
	}
	t.FinalMetrics = finalMetrics(t.Steps, agent.Usage, b.calls)
	return t
}

func agentName(id, role string) string {
	if role == "" || role == id {
		return id
	}
	return fmt.Sprintf("%s (%s)", id, role)
}

func orDash(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func agentExtra(a AgentInfo) map[string]any {
	x := map[string]any{"id": a.ID}
	for k, v := range map[string]string{"role": a.Role, "kind": a.Kind, "endpoint": a.Endpoint, "stack": a.Stack, "stack_digest": a.StackDigest} {
		if v != "" {
			x[k] = v
		}
	}
	return x
}

// builder collects an agent's steps call by call.
type builder struct {
	steps []Step
	// tools are the first request's tools; calls counts the calls added.
	tools json.RawMessage
	calls int
	// seen holds the items earlier requests carried.
	seen map[string]bool
	// leadSeen: the leading system prompt was shown.
	leadSeen bool
	// echo is the agent step of the previous call while the request
	// that carries its answer back has not been read, and echoed how many
	// of its tool calls that request has named.
	echo, echoed int
}

// input adds what an item of a request adds to the history, if anything.
func (b *builder) input(it item, first bool, c modelcall.Call) {
	if b.seen[it.key] {
		return
	}
	b.seen[it.key] = true
	ts := stamp(c.Time)
	switch it.role {
	case SourceSystem:
		if first {
			if b.leadSeen {
				return
			}
			b.leadSeen = true
		}
		b.add(Step{Timestamp: ts, Source: SourceSystem, Message: it.text})
	case SourceUser:
		b.add(Step{Timestamp: ts, Source: SourceUser, Message: it.text})
	case "assistant":
		if b.echo > 0 {
			// The previous call's answer, carried back: its tool call ids.
			s := &b.steps[b.echo-1]
			for _, call := range it.calls {
				if b.echoed < len(s.ToolCalls) && call.id != "" {
					s.ToolCalls[b.echoed].ToolCallID = call.id
				}
				b.echoed++
			}
			return
		}
		// History no recorded call produced.
		var calls []ToolCall
		for _, call := range it.calls {
			calls = append(calls, ToolCall{ToolCallID: call.id, FunctionName: call.name, Arguments: argumentsObject(call.args)})
		}
		b.add(Step{Timestamp: ts, Source: SourceAgent, Message: it.text, ToolCalls: calls, IsCopiedContext: ptr(true), LLMCallCount: ptr(0)})
	case "tool":
		b.echo = 0
		r := ObservationResult{Content: ptr(it.text)}
		at := b.lastAgent()
		if i := b.callStep(it.callID); i >= 0 {
			at, r.SourceCallID = i, ptr(it.callID)
		} else if it.callID != "" {
			r.Extra = map[string]any{"tool_call_id": it.callID}
		}
		if at < 0 {
			// A tool result before any agent step: shown as the system's.
			b.add(Step{Timestamp: ts, Source: SourceSystem, Message: "", Observation: &Observation{Results: []ObservationResult{r}}})
			return
		}
		s := &b.steps[at]
		if s.Observation == nil {
			s.Observation = &Observation{}
		}
		s.Observation.Results = append(s.Observation.Results, r)
	}
}

func (b *builder) add(s Step) {
	s.StepID = len(b.steps) + 1
	b.steps = append(b.steps, s)
}

func (b *builder) lastAgent() int {
	for i := len(b.steps) - 1; i >= 0; i-- {
		if b.steps[i].Source == SourceAgent {
			return i
		}
	}
	return -1
}

// callStep is the index of the agent step holding the tool call id, or -1.
func (b *builder) callStep(id string) int {
	if id == "" {
		return -1
	}
	for i := len(b.steps) - 1; i >= 0; i-- {
		for _, tc := range b.steps[i].ToolCalls {
			if tc.ToolCallID == id {
				return i
			}
		}
	}
	return -1
}

// agentStep adds the step of one model call.
func (b *builder) agentStep(c modelcall.Call, meter func(modelcall.Call) (modelcall.Record, bool)) {
	a := modelcall.AnswerOf(c)
	s := Step{Timestamp: stamp(c.Time), Source: SourceAgent, Message: a.Text, LLMCallCount: ptr(1)}
	for i, tc := range a.ToolCalls {
		// Named again by the next request, which carries the call's id.
		s.ToolCalls = append(s.ToolCalls, ToolCall{ToolCallID: fmt.Sprintf("troupe-call-%d-%d", c.N, i+1), FunctionName: tc.Name, Arguments: argumentsObject(tc.Arguments)})
	}
	x := map[string]any{"call": c.N, "api": string(c.API), "status": c.Status}
	if a.Failed {
		x["failed"] = true
		if c.Error != "" {
			x["error"] = c.Error
		}
	}
	if c.AnswerOmitted > 0 {
		x["answer_omitted_bytes"] = c.AnswerOmitted
	}
	s.Extra = x
	if r, ok := lookup(meter, c); ok {
		m := &Metrics{PromptTokens: ptr(r.InputTokens), CompletionTokens: ptr(r.OutputTokens), CachedTokens: ptr(r.CachedTokens), CostUSD: ptr(modelcall.USD(r.CostUSD))}
		mx := map[string]any{"latency_ms": r.LatencyMS}
		if r.CachedSource != "" {
			mx["cached_source"] = r.CachedSource
		}
		if r.ReasoningTokens > 0 {
			mx["reasoning_tokens"] = r.ReasoningTokens
		}
		if r.ErrorClass != "" {
			mx["error_class"] = r.ErrorClass
		}
		m.Extra = mx
		s.Metrics = m
	} else if u := a.Usage; u != (modelcall.Usage{}) {
		m := &Metrics{PromptTokens: ptr(u.Input), CompletionTokens: ptr(u.Output)}
		if u.CachedReported {
			m.CachedTokens = ptr(u.Cached)
		}
		s.Metrics = m
	}
	b.add(s)
	b.echo, b.echoed = len(b.steps), 0
}

func lookup(meter func(modelcall.Call) (modelcall.Record, bool), c modelcall.Call) (modelcall.Record, bool) {
	if meter == nil {
		return modelcall.Record{}, false
	}
	return meter(c)
}

// argumentsObject makes a tool call's arguments the object ATIF requires:
// arguments that are not an object are kept under "input".
func argumentsObject(v any) map[string]any {
	switch v := v.(type) {
	case map[string]any:
		return v
	case nil:
		return map[string]any{}
	}
	return map[string]any{"input": v}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// finalMetrics sums the steps' metrics; the cost is the gateway's total
// when known.
func finalMetrics(steps []Step, usage *modelcall.Totals, calls int) *FinalMetrics {
	var prompt, completion, cached int64
	var cost modelcall.USD
	costKnown := false
	for _, s := range steps {
		if m := s.Metrics; m != nil {
			prompt += deref(m.PromptTokens)
			completion += deref(m.CompletionTokens)
			cached += deref(m.CachedTokens)
			if m.CostUSD != nil {
				cost, costKnown = cost+*m.CostUSD, true
			}
		}
	}
	f := &FinalMetrics{TotalPromptTokens: ptr(prompt), TotalCompletionTokens: ptr(completion), TotalCachedTokens: ptr(cached), TotalSteps: ptr(len(steps)),
		Extra: map[string]any{"llm_calls": calls}}
	if usage != nil {
		cost, costKnown = usage.CostUSD, true
		f.Extra["gateway_calls"] = usage.Calls
	}
	if costKnown {
		f.TotalCostUSD = ptr(cost)
	}
	return f
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// toolDefinitions converts a request's tools to OpenAI's function-calling
// shape, as ATIF asks.
func toolDefinitions(raw json.RawMessage) []map[string]any {
	tools, ok := modelcall.ParseTools(raw)
	if !ok {
		return nil
	}
	var out []map[string]any
	for _, t := range tools {
		switch f := t.Function; {
		case f == nil || f.Wrapped: // a built-in tool, or chat completions': kept as it was
			out = append(out, t.Decoded)
		default: // Anthropic's, the Responses API's
			out = append(out, map[string]any{"type": "function", "function": map[string]any{"name": f.Name, "description": f.Description, "parameters": f.Parameters}})
		}
	}
	return out
}
