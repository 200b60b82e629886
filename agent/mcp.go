package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/troupebench/troupe/contract"
)

// The task's MCP servers (contract.EnvMCPServers) give the agent more
// tools, as Harbor's agents register them: each server's tools reach the
// model as "<server>__<tool>" beside the agent's own.

// mcpConnectTimeout bounds the attempts to reach one server at the start:
// a compose sidecar may still be starting.
const mcpConnectTimeout = 20 * time.Second

// mcpCallTimeout bounds one tool call.
const mcpCallTimeout = 5 * time.Minute

// taskTools are the task's MCP servers' tools, by the name the model
// calls them.
type taskTools struct {
	sessions []*mcp.ClientSession
	tools    map[string]taskTool
	specs    []toolSpec
}

// taskTool is one tool of a server: its session and its own name.
type taskTool struct {
	session *mcp.ClientSession
	name    string
}

// connectTaskTools reaches each server (retrying until mcpConnectTimeout)
// and lists its tools. A server it cannot reach is logged and left out:
// the agent works on with the rest.
func connectTaskTools(ctx context.Context, servers []contract.MCPServer, log *slog.Logger) *taskTools {
	t := &taskTools{tools: map[string]taskTool{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "troupe-agent", Version: "1"}, nil)
	for _, s := range servers {
		session, err := connectServer(ctx, client, s)
		if err != nil {
			log.Warn("task MCP server unreachable: its tools are left out", "mcp_server", s.Name, "transport", s.Transport, "err", err.Error())
			continue
		}
		t.sessions = append(t.sessions, session)
		n, err := t.add(ctx, s.Name, session)
		if err != nil {
			log.Warn("task MCP server's tools could not be listed", "mcp_server", s.Name, "err", err.Error())
			continue
		}
		log.Info("task MCP server", "mcp_server", s.Name, "tools", n)
	}
	return t
}

// connectServer opens a session with one server.
func connectServer(ctx context.Context, client *mcp.Client, s contract.MCPServer) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
	defer cancel()
	for wait := 200 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		var transport mcp.Transport
		switch s.Transport {
		case contract.TransportStdio:
			// Not CommandContext: the session's Close ends the process.
			// The server is the task's program: it is not handed the
			// agent's key and token files by name.
			cmd := exec.Command(s.Command, s.Args...)
			cmd.Env = withoutSecrets(os.Environ())
			transport = &mcp.CommandTransport{Command: cmd}
		case contract.TransportSSE:
			transport = &mcp.SSEClientTransport{Endpoint: s.URL}
		default:
			transport = &mcp.StreamableClientTransport{Endpoint: s.URL, MaxRetries: -1}
		}
		session, err := client.Connect(ctx, transport, nil)
		if err == nil {
			return session, nil
		}
		// A command that cannot start will not start later.
		var execErr *exec.Error
		if errors.As(err, &execErr) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (tried for %s)", err, mcpConnectTimeout)
		case <-time.After(wait):
		}
	}
}

// withoutSecrets is env less the variables naming the agent's key and
// token files.
func withoutSecrets(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, contract.EnvPrivateKeyFile+"=") || strings.HasPrefix(kv, contract.EnvLLMTokenFile+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// add lists a session's tools under "<server>__<tool>" names.
func (t *taskTools) add(ctx context.Context, server string, session *mcp.ClientSession) (int, error) {
	n := 0
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			return n, err
		}
		name := t.unique(toolName(server, tool.Name))
		params := map[string]any{"type": "object", "properties": map[string]any{}}
		if data, err := json.Marshal(tool.InputSchema); err == nil {
			var schema map[string]any
			if json.Unmarshal(data, &schema) == nil && schema != nil {
				params = schema
			}
		}
		var s toolSpec
		s.Type = "function"
		s.Function.Name = name
		s.Function.Description = fmt.Sprintf("[%s, the task's MCP server] %s", server, tool.Description)
		s.Function.Parameters = params
		t.specs = append(t.specs, s)
		t.tools[name] = taskTool{session: session, name: tool.Name}
		n++
	}
	return n, nil
}

// nameUnsafe are the characters a model's function name may not hold
// (OpenAI's ^[a-zA-Z0-9_-]{1,64}$).
var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// toolName is the model's name for a server's tool.
func toolName(server, tool string) string {
	name := nameUnsafe.ReplaceAllString(server, "_") + "__" + nameUnsafe.ReplaceAllString(tool, "_")
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// unique makes name differ from every tool's, the agent's own included.
func (t *taskTools) unique(name string) string {
	taken := func(n string) bool {
		if _, ok := t.tools[n]; ok {
			return true
		}
		for _, s := range toolSpecs {
			if s.Function.Name == n {
				return true
			}
		}
		return false
	}
	for i := 2; taken(name); i++ {
		suffix := fmt.Sprintf("_%d", i)
		name = name[:min(len(name), 64-len(suffix))] + suffix
	}
	return name
}

// call runs a task tool; ok is false when name is none of them.
func (t *taskTools) call(ctx context.Context, name, rawArgs string) (toolResult, bool) {
	if t == nil {
		return toolResult{}, false
	}
	tool, ok := t.tools[name]
	if !ok {
		return toolResult{}, false
	}
	var args map[string]any
	if strings.TrimSpace(rawArgs) != "" {
		if err := json.Unmarshal([]byte(rawArgs), &args); err != nil {
			return toolResult{fmt.Sprintf("error: the arguments are not a JSON object: %v", err), true}, true
		}
	}
	ctx, cancel := context.WithTimeout(ctx, mcpCallTimeout)
	defer cancel()
	res, err := tool.session.CallTool(ctx, &mcp.CallToolParams{Name: tool.name, Arguments: args})
	if err != nil {
		return toolResult{"error: " + err.Error(), true}, true
	}
	return toolResult{capText(resultText(res)), res.IsError}, true
}

// resultText is what the model sees of a tool's result: its text, and
// what else it returned, named.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[an image, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes]", c.MIMEType, len(c.Data)))
		default:
			if data, err := json.Marshal(c); err == nil {
				parts = append(parts, string(data))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if data, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(data))
		}
	}
	if len(parts) == 0 {
		return "(no output)"
	}
	return strings.Join(parts, "\n")
}

// specs are every tool the model may call: the agent's own, then the
// task's.
func (t *taskTools) allSpecs() []toolSpec {
	if t == nil || len(t.specs) == 0 {
		return toolSpecs
	}
	return append(append([]toolSpec{}, toolSpecs...), t.specs...)
}

// close ends every session (a stdio server's process with it).
func (t *taskTools) close() {
	if t == nil {
		return
	}
	for _, s := range t.sessions {
		_ = s.Close()
	}
}
