// Package modelcalltest makes model calls for tests and benchmarks: the
// requests of a synthetic conversation, as an agent sends them.
package modelcalltest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Conversation is the chat completions requests of a conversation of the
// given number of calls: a system prompt, six tools, and one message more
// on each call, each request carrying the whole history, as an agent
// resends it.
func Conversation(calls int) [][]byte {
	msgs := []map[string]string{{"role": "system", "content": strings.Repeat("system prompt ", 80)}}
	tools := []map[string]any{}
	for i := range 6 {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": fmt.Sprintf("tool_%d", i), "description": strings.Repeat("does a thing ", 20)}})
	}
	var out [][]byte
	for i := range calls {
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("message %d: %s", i, strings.Repeat("some words of the turn ", 20))})
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": tools})
		out = append(out, body)
	}
	return out
}
