package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/troupebench/troupe/contract"
)

// The chat completions wire format, as much of it as the agent uses.
type (
	message struct {
		Role       string     `json:"role"`
		Content    *string    `json:"content"`
		ToolCalls  []toolCall `json:"tool_calls,omitempty"`
		ToolCallID string     `json:"tool_call_id,omitempty"`
	}
	toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	toolSpec struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	}
	chatRequest struct {
		Model    string     `json:"model"`
		Messages []message  `json:"messages"`
		Tools    []toolSpec `json:"tools,omitempty"`
		// The manifest's generation settings, when it sets them.
		ReasoningEffort     string `json:"reasoning_effort,omitempty"`
		MaxCompletionTokens int64  `json:"max_completion_tokens,omitempty"`
	}
	chatResponse struct {
		Choices []struct {
			Message      message `json:"message"`
			FinishReason string  `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
)

func text(s string) *string { return &s }

// errBudget is the gateway's budget_exhausted refusal: not retried.
type errBudget struct{ msg string }

func (e *errBudget) Error() string { return e.msg }

// errEnded is the gateway's trial_ended refusal: the trial has ended, and
// the call is neither retried nor reported to the team.
type errEnded struct{ msg string }

func (e *errEnded) Error() string { return e.msg }

// llmClient calls /chat/completions of an OpenAI-compatible endpoint.
type llmClient struct {
	base, token, model string
	// gen is the manifest's generation settings: sent with each call, and
	// the threshold at which the conversation is compacted.
	gen  contract.Generation
	http *http.Client
	// onRetry reports a retry (for logs).
	onRetry func(attempt int, status int, wait time.Duration, err error)
}

const maxAttempts = 6

// chat sends one request, retrying rate limits, overloads and lost
// connections with backoff (honouring Retry-After), never past ctx's
// deadline. A budget refusal is returned at once as *errBudget.
func (c *llmClient) chat(ctx context.Context, msgs []message, tools []toolSpec) (*chatResponse, error) {
	compact(msgs, c.gen)
	body, err := c.request(msgs, tools)
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		resp, status, retryAfter, err := c.once(ctx, body)
		if err == nil {
			return resp, nil
		}
		last = err
		_, spent := errors.AsType[*errBudget](err)
		if _, ended := errors.AsType[*errEnded](err); spent || ended || ctx.Err() != nil || !retryable(status) || attempt == maxAttempts {
			return nil, err
		}
		wait := retryAfter
		if wait <= 0 {
			wait = time.Duration(1<<(attempt-1)) * time.Second
		}
		wait = min(wait, 60*time.Second)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, fmt.Errorf("%w (no time left to retry)", err)
		}
		if c.onRetry != nil {
			c.onRetry(attempt, status, wait, err)
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return nil, err
		}
	}
	return nil, last
}

// request is a call's body: the messages and tools, the generation
// settings, and generation.extra's parameters as they are (none replaces
// the model, the messages or the tools).
func (c *llmClient) request(msgs []message, tools []toolSpec) ([]byte, error) {
	body, err := json.Marshal(chatRequest{Model: c.model, Messages: msgs, Tools: tools, ReasoningEffort: c.gen.ThinkingEffort, MaxCompletionTokens: c.gen.MaxOutputTokens})
	if err != nil || len(c.gen.Extra) == 0 {
		return body, err
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	for k, v := range c.gen.Extra {
		if _, set := req[k]; !set {
			req[k] = v
		}
	}
	return json.Marshal(req)
}

// compactAt is the conversation's size, in estimated tokens, past which it
// is compacted: compact_at_tokens, else compact_at_percent of the context
// window; 0 when neither is set.
func compactAt(g contract.Generation) int64 {
	if g.CompactAtTokens > 0 {
		return g.CompactAtTokens
	}
	if g.CompactAtPercent > 0 && g.ContextWindowTokens > 0 {
		return g.ContextWindowTokens * g.CompactAtPercent / 100
	}
	return 0
}

// compact shortens the oldest tool results when the conversation (about
// four bytes a token) has grown past the threshold, so that it fits under
// it again; it reports whether it did.
func compact(msgs []message, g contract.Generation) bool {
	limit := compactAt(g) * 4
	if limit <= 0 {
		return false
	}
	var total, tools int64
	for _, m := range msgs {
		n := int64(0)
		if m.Content != nil {
			n = int64(len(*m.Content))
		}
		for _, tc := range m.ToolCalls {
			n += int64(len(tc.Function.Arguments))
		}
		total += n
		if m.Role == "tool" {
			tools += n
		}
	}
	if total <= limit {
		return false
	}
	shrinkToolResults(msgs, int(max(0, limit-(total-tools))))
	return true
}

// retryable: 429 (but not a budget refusal), a timeout, any server error
// (a provider's 500 is usually transient, and one must not idle an agent
// for the rest of its trial), and no response at all (status 0).
func retryable(status int) bool {
	return status == 0 || status == 408 || status == 429 || status >= 500
}

func (c *llmClient) once(ctx context.Context, body []byte) (*chatResponse, int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, -1, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("model call: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("model call: reading the answer: %w", err)
	}
	return decodeAnswer(resp.StatusCode, resp.Header.Get("Retry-After"), data)
}

// decodeAnswer reads a chat completions answer: a response with at least
// one choice, or an error (a budget refusal as *errBudget), with the status
// and the Retry-After wait for the retry decision.
func decodeAnswer(status int, retryAfterHeader string, data []byte) (*chatResponse, int, time.Duration, error) {
	if status != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
			} `json:"error"`
		}
		json.Unmarshal(data, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = strings.TrimSpace(string(data[:min(len(data), 300)]))
		}
		if e.Error.Type == "budget_exhausted" || e.Error.Code == "budget_exhausted" {
			return nil, status, 0, &errBudget{msg: msg}
		}
		if e.Error.Type == "trial_ended" {
			return nil, status, 0, &errEnded{msg: msg}
		}
		return nil, status, retryAfter(retryAfterHeader), fmt.Errorf("model call: %d %s", status, msg)
	}
	var out chatResponse
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) == 0 {
		return nil, status, 0, fmt.Errorf("model call: an answer without choices: %.200s", data)
	}
	return &out, status, 0, nil
}

func retryAfter(v string) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
