package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/troupebench/troupe/contract"
)

// mcpStdioArg, as the test binary's last argument, makes it a stdio MCP
// server with one tool, shout: the task's stdio server in the tests.
const mcpStdioArg = "troupe-test-mcp-stdio"

type shoutArgs struct {
	Text string `json:"text"`
}

func runStdioMCPServer() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	s := mcp.NewServer(&mcp.Implementation{Name: "local", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Say it louder."}, func(ctx context.Context, req *mcp.CallToolRequest, in shoutArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
	})
	if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return 1
	}
	return 0
}

type lookupArgs struct {
	Key string `json:"key"`
}

// TestTaskMCPServersAreTools: the task's servers (one over streamable
// HTTP, one over stdio, one that cannot start) give the agent their tools
// as <server>__<tool>; the one that cannot start is logged and left out.
func TestTaskMCPServersAreTools(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	srv := mcp.NewServer(&mcp.Implementation{Name: "facts", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look a key up."}, func(ctx context.Context, req *mcp.CallToolRequest, in lookupArgs) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		asked = append(asked, in.Key)
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the " + in.Key + " is plum"}}}, nil, nil
	})
	web := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(web.Close)

	servers, err := json.Marshal([]contract.MCPServer{
		{Name: "facts", Transport: contract.TransportStreamableHTTP, URL: web.URL},
		{Name: "local", Transport: contract.TransportStdio, Command: agentBinary, Args: []string{mcpStdioArg}},
		{Name: "gone", Transport: contract.TransportStdio, Command: "/nonexistent/mcp-server"},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{scenario: "task-mcp", env: map[string]string{contract.EnvMCPServers: string(servers)}}, solo)
	h.post("start", "solo-1")
	done := h.waitDone(30 * time.Second)
	if done.Content != "DONE: THE WORD IS PLUM" {
		t.Errorf("DONE: %q", done.Content)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0] != "word" {
		t.Errorf("the HTTP server was asked %q, want [word]", asked)
	}
	mu.Unlock()
	for _, want := range []struct{ server, msg string }{{"facts", "task MCP server"}, {"local", "task MCP server"}, {"gone", "task MCP server unreachable: its tools are left out"}} {
		found := false
		for _, l := range h.logLines("solo-1", want.msg) {
			found = found || l["mcp_server"] == want.server
		}
		if !found {
			t.Errorf("no %q log line for %s", want.msg, want.server)
		}
	}
	if tools := h.logLines("solo-1", "tool call"); len(tools) < 2 || tools[0]["tool"] != "facts__lookup" || tools[1]["tool"] != "local__shout" {
		t.Errorf("tool calls logged as %v", tools)
	}
}

func TestToolNames(t *testing.T) {
	t.Parallel()
	tt := &taskTools{tools: map[string]taskTool{}}
	for _, c := range []struct{ server, tool, want string }{
		{"facts", "lookup", "facts__lookup"},
		{"my server", "do.it", "my_server__do_it"},
		{strings.Repeat("s", 70), "t", strings.Repeat("s", 64)},
	} {
		if got := tt.unique(toolName(c.server, c.tool)); got != c.want {
			t.Errorf("%s/%s: %q, want %q", c.server, c.tool, got, c.want)
		}
	}
	tt.tools["facts__lookup"] = taskTool{}
	if got := tt.unique("facts__lookup"); got != "facts__lookup_2" {
		t.Errorf("a taken name became %q", got)
	}
	long := strings.Repeat("x", 64)
	tt.tools[long] = taskTool{}
	if got := tt.unique(long); len(got) != 64 || !strings.HasSuffix(got, "_2") {
		t.Errorf("a taken 64-character name became %q", got)
	}
}

// A server's environment lacks the agent's key and token variables.
func TestWithoutSecrets(t *testing.T) {
	t.Parallel()
	got := withoutSecrets([]string{contract.EnvPrivateKeyFile + "=/k", "PATH=/bin", contract.EnvLLMTokenFile + "=/t"})
	if len(got) != 1 || got[0] != "PATH=/bin" {
		t.Errorf("%q", got)
	}
}
