// Command acp-hello is a small Agent Client Protocol (ACP) agent: a
// stand-in for Goose, Codex or Claude Code behind troupe's ACP bridge
// (troupe acp), used by troupe's tests and as an example of a stack.
//
// It speaks ACP over stdio with github.com/coder/acp-go-sdk. On
// session/new it starts the MCP servers the client offers (the bridge's
// team tools: send_message, read_channel, list_team) with the MCP SDK. On
// each prompt it calls a model through any OpenAI-compatible chat
// completions API (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL; a stack
// maps them from the contract's llm_base_url, token and model), offering
// its own tools beside the MCP ones, and does what the model asks until it
// answers without a tool call:
//
//   - write_file {path, content}: through the client's fs/write_text_file;
//   - read_file {path}: through fs/read_text_file;
//   - shell {command}: through a client terminal (terminal/create,
//     wait_for_exit, output, release), after session/request_permission;
//   - any MCP tool: tools/call on its server.
//
// Each tool call is streamed as a tool_call update and its result as a
// tool_call_update; the model's final answer is streamed as the agent's
// message, and the turn ends with end_turn and the model's token usage.
// It logs to standard error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/coder/acp-go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// maxRounds bounds the model calls of one prompt.
const maxRounds = 20

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &agent{
		log:      log,
		llm:      openai.NewClient(option.WithMaxRetries(2)), // OPENAI_BASE_URL and OPENAI_API_KEY
		model:    os.Getenv("OPENAI_MODEL"),
		sessions: map[acp.SessionId]*session{},
	}
	if a.model == "" {
		a.model = "gpt-4.1-mini"
	}
	// The SDK starts reading in its constructor, before it has stored
	// the connection its handlers use, and SetLogger comes after it:
	// nothing is read until both are done.
	gate := make(chan struct{})
	a.conn = acp.NewAgentSideConnection(a, os.Stdout, gatedReader{os.Stdin, gate})
	a.conn.SetLogger(log)
	close(gate)
	log.Info("acp-hello ready", "model", a.model)
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
	}
	a.close()
	log.Info("acp-hello done")
}

// gatedReader holds its first read until gate is closed.
type gatedReader struct {
	r    io.Reader
	gate <-chan struct{}
}

func (g gatedReader) Read(p []byte) (int, error) {
	<-g.gate
	return g.r.Read(p)
}

type agent struct {
	log   *slog.Logger
	conn  *acp.AgentSideConnection
	llm   openai.Client
	model string

	mu       sync.Mutex
	seq      int
	sessions map[acp.SessionId]*session
}

type session struct {
	id     acp.SessionId
	cwd    string
	msgs   []openai.ChatCompletionMessageParamUnion
	mcp    map[string]*mcp.ClientSession // by tool name
	conns  []*mcp.ClientSession
	tools  []openai.ChatCompletionToolUnionParam
	cancel context.CancelFunc
}

var _ acp.Agent = (*agent)(nil)

func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.log.Info("initialize", "fs_write", p.ClientCapabilities.Fs.WriteTextFile, "terminal", p.ClientCapabilities.Terminal)
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "acp-hello", Version: "1"},
	}, nil
}

func (a *agent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	a.mu.Lock()
	a.seq++
	s := &session{id: acp.SessionId(fmt.Sprintf("hello-%d", a.seq)), cwd: p.Cwd, mcp: map[string]*mcp.ClientSession{}, tools: ownTools()}
	a.sessions[s.id] = s
	a.mu.Unlock()
	for _, srv := range p.McpServers {
		if srv.Stdio == nil {
			continue
		}
		if err := a.connectMCP(ctx, s, srv.Stdio); err != nil {
			return acp.NewSessionResponse{}, fmt.Errorf("MCP server %s: %w", srv.Stdio.Name, err)
		}
	}
	a.log.Info("session", "id", string(s.id), "cwd", s.cwd, "tools", len(s.tools))
	return acp.NewSessionResponse{SessionId: s.id}, nil
}

// connectMCP starts a stdio MCP server and offers its tools to the model.
func (a *agent) connectMCP(ctx context.Context, s *session, srv *acp.McpServerStdio) error {
	cmd := exec.Command(srv.Command, srv.Args...)
	cmd.Env = os.Environ()
	for _, e := range srv.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "acp-hello", Version: "1"}, nil)
	// Not ctx: the server lives as long as the session, not the request.
	cs, err := client.Connect(context.WithoutCancel(ctx), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return err
	}
	s.conns = append(s.conns, cs)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	for _, t := range list.Tools {
		var params map[string]any
		raw, _ := json.Marshal(t.InputSchema)
		json.Unmarshal(raw, &params)
		s.tools = append(s.tools, tool(t.Name, t.Description, params))
		s.mcp[t.Name] = cs
	}
	return nil
}

func tool(name, description string, params map[string]any) openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Description: openai.String(description), Parameters: params})
}

func ownTools() []openai.ChatCompletionToolUnionParam {
	str := map[string]any{"type": "string"}
	obj := func(required []string, props map[string]any) map[string]any {
		return map[string]any{"type": "object", "properties": props, "required": required}
	}
	return []openai.ChatCompletionToolUnionParam{
		tool("write_file", "Write a text file (a path relative to the working folder, or absolute).", obj([]string{"path", "content"}, map[string]any{"path": str, "content": str})),
		tool("read_file", "Read a text file.", obj([]string{"path"}, map[string]any{"path": str})),
		tool("shell", "Run a shell command in the working folder; returns its exit status and output.", obj([]string{"command"}, map[string]any{"command": str})),
	}
}

func (a *agent) session(id acp.SessionId) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if !ok {
		return nil, fmt.Errorf("no session %s", id)
	}
	return s, nil
}

func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.sessions[p.SessionId]; ok && s.cancel != nil {
		s.cancel()
	}
	return nil
}

// Prompt is one turn: model calls and their tools until a plain answer.
func (a *agent) Prompt(_ context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	s, err := a.session(p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	// The turn ends with session/cancel, not with the request's context.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.mu.Lock()
	s.cancel = cancel
	a.mu.Unlock()
	var parts []string
	for _, b := range p.Prompt {
		if b.Text != nil {
			parts = append(parts, b.Text.Text)
		}
	}
	s.msgs = append(s.msgs, openai.UserMessage(strings.Join(parts, "\n\n")))
	usage := acp.Usage{}
	for round := 1; round <= maxRounds; round++ {
		resp, err := a.llm.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: a.model, Messages: s.msgs, Tools: s.tools})
		if ctx.Err() != nil {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled, Usage: &usage}, nil
		}
		if err != nil {
			return acp.PromptResponse{}, fmt.Errorf("model call: %w", err)
		}
		usage.InputTokens += int(resp.Usage.PromptTokens)
		usage.OutputTokens += int(resp.Usage.CompletionTokens)
		usage.TotalTokens += int(resp.Usage.TotalTokens)
		if len(resp.Choices) == 0 {
			return acp.PromptResponse{}, errors.New("model call: an answer without choices")
		}
		msg := resp.Choices[0].Message
		s.msgs = append(s.msgs, msg.ToParam())
		if len(msg.ToolCalls) == 0 {
			if msg.Content != "" {
				a.update(ctx, s, acp.UpdateAgentMessageText(msg.Content))
			}
			return acp.PromptResponse{StopReason: acp.StopReasonEndTurn, Usage: &usage}, nil
		}
		for _, tc := range msg.ToolCalls {
			result, failed := a.runTool(ctx, s, tc.ID, tc.Function.Name, tc.Function.Arguments)
			s.msgs = append(s.msgs, openai.ToolMessage(result, tc.ID))
			a.log.Info("tool call", "tool", tc.Function.Name, "failed", failed)
		}
	}
	return acp.PromptResponse{StopReason: acp.StopReasonMaxTurnRequests, Usage: &usage}, nil
}

func (a *agent) update(ctx context.Context, s *session, u acp.SessionUpdate) {
	if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.id, Update: u}); err != nil {
		a.log.Warn("session/update failed", "err", err)
	}
}

// runTool runs one tool call, streaming its start and its end.
func (a *agent) runTool(ctx context.Context, s *session, id, name, rawArgs string) (string, bool) {
	var args map[string]any
	json.Unmarshal([]byte(rawArgs), &args)
	get := func(k string) string { v, _ := args[k].(string); return v }
	kind := map[string]acp.ToolKind{"write_file": acp.ToolKindEdit, "read_file": acp.ToolKindRead, "shell": acp.ToolKindExecute}[name]
	if kind == "" {
		kind = acp.ToolKindOther
	}
	callID := acp.ToolCallId(id)
	a.update(ctx, s, acp.StartToolCall(callID, name, acp.WithStartKind(kind), acp.WithStartStatus(acp.ToolCallStatusInProgress), acp.WithStartRawInput(args)))
	result, err := a.tool(ctx, s, callID, name, get, args)
	status := acp.ToolCallStatusCompleted
	if err != nil {
		status, result = acp.ToolCallStatusFailed, "error: "+err.Error()
	}
	a.update(ctx, s, acp.UpdateToolCall(callID, acp.WithUpdateStatus(status), acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(result))})))
	return result, err != nil
}

func (a *agent) tool(ctx context.Context, s *session, callID acp.ToolCallId, name string, get func(string) string, args map[string]any) (string, error) {
	path := func() string {
		p := get("path")
		if !filepath.IsAbs(p) {
			p = filepath.Join(s.cwd, p)
		}
		return p
	}
	switch name {
	case "write_file":
		_, err := a.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: s.id, Path: path(), Content: get("content")})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("wrote %d bytes to %s", len(get("content")), path()), nil
	case "read_file":
		resp, err := a.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: s.id, Path: path()})
		return resp.Content, err
	case "shell":
		return a.shell(ctx, s, callID, get("command"))
	}
	cs, ok := s.mcp[name]
	if !ok {
		return "", fmt.Errorf("there is no tool %q", name)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	var out []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out = append(out, t.Text)
		}
	}
	if res.IsError {
		return "", errors.New(strings.Join(out, "\n"))
	}
	return strings.Join(out, "\n"), nil
}

// shell asks for permission, then runs the command in a client terminal.
func (a *agent) shell(ctx context.Context, s *session, callID acp.ToolCallId, command string) (string, error) {
	perm, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: s.id,
		ToolCall:  acp.ToolCallUpdate{ToolCallId: callID, Title: acp.Ptr("shell: " + command), Kind: acp.Ptr(acp.ToolKindExecute)},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Run it", OptionId: "run"},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Do not run it", OptionId: "skip"},
		},
	})
	if err != nil {
		return "", err
	}
	if perm.Outcome.Selected == nil || perm.Outcome.Selected.OptionId != "run" {
		return "", errors.New("permission to run the command was refused")
	}
	limit := 64 << 10
	term, err := a.conn.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: s.id, Command: "sh", Args: []string{"-c", command}, Cwd: &s.cwd, OutputByteLimit: &limit})
	if err != nil {
		return "", err
	}
	defer a.conn.ReleaseTerminal(context.WithoutCancel(ctx), acp.ReleaseTerminalRequest{SessionId: s.id, TerminalId: term.TerminalId})
	exit, err := a.conn.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: s.id, TerminalId: term.TerminalId})
	if err != nil {
		return "", err
	}
	out, err := a.conn.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: s.id, TerminalId: term.TerminalId})
	if err != nil {
		return "", err
	}
	code := -1
	if exit.ExitCode != nil {
		code = *exit.ExitCode
	}
	return fmt.Sprintf("exit %d\n%s", code, out.Output), nil
}

func (a *agent) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sessions {
		for _, cs := range s.conns {
			cs.Close()
		}
	}
}

func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}
