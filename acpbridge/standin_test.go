package acpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/troupebench/troupe/teamtools"
)

// standIn is the tests' ACP agent: the test binary run again as the
// bridge's child (envChild names its mode). It calls no model; each mode
// plays one behaviour the bridge must handle.
//
//	quick    answers "echo: <the prompt's last line>" at once, in one update
//	echo     answers "echo: <the prompt's last line>", after a thought and
//	         a tool call, and writes each prompt's blocks to prompt-<n>.json
//	         in its cwd through fs/write_text_file
//	send     sends "hello from the child" to user through the team tools'
//	         send_message, then ends its turn with a text of its own
//	tools    writes a file, reads it back, runs a command in a terminal,
//	         asks for permission, and answers with what it saw
//	team     answers with what list_team and read_channel return
//	hang     answers no prompt until session/cancel
//	crash    writes to stderr and exits 3 when prompted
//	garbage  writes a line that is not JSON-RPC to stdout when prompted
//	dead     exits 2 at once, saying why on stderr
type standIn struct {
	mode string
	conn *acp.AgentSideConnection

	mu      sync.Mutex
	cwd     string
	mcp     *mcp.ClientSession
	prompts int
	cancel  context.CancelFunc
}

var _ acp.Agent = (*standIn)(nil)

func runStandIn(mode string) int {
	if dir, _ := os.Getwd(); dir != "" {
		os.WriteFile(filepath.Join(dir, "child.pid"), []byte(fmt.Sprint(os.Getpid())), 0o644)
	}
	if mode == "dead" {
		fmt.Fprintln(os.Stderr, "starting up")
		fmt.Fprintln(os.Stderr, "fatal: OPENAI_API_KEY is not set")
		return 2
	}
	s := &standIn{mode: mode}
	// The SDK reads in its constructor, before it stores the connection
	// its handlers use: nothing is read until the constructor returned.
	gate := make(chan struct{})
	s.conn = acp.NewAgentSideConnection(s, os.Stdout, &frameReader{r: os.Stdin, gate: gate})
	close(gate)
	<-s.conn.Done()
	if s.mcp != nil {
		s.mcp.Close()
	}
	return 0
}

func (s *standIn) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	if !p.ClientCapabilities.Fs.ReadTextFile || !p.ClientCapabilities.Fs.WriteTextFile || !p.ClientCapabilities.Terminal {
		return acp.InitializeResponse{}, fmt.Errorf("the client offers %+v", p.ClientCapabilities)
	}
	return acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber, AgentInfo: &acp.Implementation{Name: "stand-in", Version: "0"}}, nil
}

func (s *standIn) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	s.cwd = p.Cwd
	for _, srv := range p.McpServers {
		if srv.Stdio == nil || srv.Stdio.Name != teamtools.ServerName {
			continue
		}
		cmd := exec.Command(srv.Stdio.Command, srv.Stdio.Args...)
		client := mcp.NewClient(&mcp.Implementation{Name: "stand-in", Version: "0"}, nil)
		cs, err := client.Connect(context.WithoutCancel(ctx), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			return acp.NewSessionResponse{}, err
		}
		s.mcp = cs
	}
	if s.mcp == nil {
		return acp.NewSessionResponse{}, fmt.Errorf("no %s MCP server in %d offered", teamtools.ServerName, len(p.McpServers))
	}
	return acp.NewSessionResponse{SessionId: "stand-in-1"}, nil
}

func (s *standIn) Prompt(_ context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.mu.Lock()
	s.cancel = cancel
	s.prompts++
	n := s.prompts
	s.mu.Unlock()
	say := func(u acp.SessionUpdate) {
		s.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u})
	}
	var texts []string
	for _, b := range p.Prompt {
		if b.Text != nil {
			texts = append(texts, b.Text.Text)
		}
	}
	last := texts[len(texts)-1]
	last = last[strings.LastIndexByte(last, '\n')+1:]
	switch s.mode {
	case "quick":
		say(acp.UpdateAgentMessageText("echo: " + last))
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case "echo":
		data, _ := json.Marshal(texts)
		if _, err := s.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: p.SessionId, Path: filepath.Join(s.cwd, fmt.Sprintf("prompt-%d.json", n)), Content: string(data)}); err != nil {
			return acp.PromptResponse{}, err
		}
		say(acp.UpdateAgentThoughtText("let me think"))
		say(acp.UpdateAgentMessageText("Looking into it."))
		say(acp.StartToolCall("call-1", "look", acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusPending)))
		say(acp.UpdateToolCall("call-1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted)))
		say(acp.UpdateAgentMessageText("echo: "))
		say(acp.UpdateAgentMessageText(last))
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn, Usage: &acp.Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}}, nil
	case "send":
		res, err := s.mcp.CallTool(ctx, &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"content": "hello from the child", "mentions": []string{"user"}}})
		if err != nil || res.IsError {
			return acp.PromptResponse{}, fmt.Errorf("send_message: %v %v", err, res)
		}
		say(acp.UpdateAgentMessageText("I sent it myself."))
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case "tools":
		return s.tools(ctx, p.SessionId, say)
	case "team":
		var out []string
		for _, name := range []string{"list_team", "read_channel"} {
			res, err := s.mcp.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
			if err != nil {
				return acp.PromptResponse{}, err
			}
			for _, c := range res.Content {
				out = append(out, c.(*mcp.TextContent).Text)
			}
		}
		// An unknown mention is an error the agent sees.
		res, err := s.mcp.CallTool(ctx, &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"content": "hi", "mentions": []string{"nobody"}}})
		if err == nil && res.IsError {
			out = append(out, "refused: "+res.Content[0].(*mcp.TextContent).Text)
		}
		say(acp.UpdateAgentMessageText(strings.Join(out, "\n")))
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case "hang":
		<-ctx.Done()
		fmt.Fprintln(os.Stderr, "cancelled")
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case "crash":
		fmt.Fprintln(os.Stderr, "panic: the stand-in crashed on purpose")
		os.Exit(3)
	case "garbage":
		fmt.Fprintln(os.Stdout, "Loading model weights... done")
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	return acp.PromptResponse{}, fmt.Errorf("unknown mode %q", s.mode)
}

func (s *standIn) tools(ctx context.Context, sid acp.SessionId, say func(acp.SessionUpdate)) (acp.PromptResponse, error) {
	path := filepath.Join(s.cwd, "sub", "note.txt")
	if _, err := s.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: sid, Path: path, Content: "one\ntwo\nthree\n"}); err != nil {
		return acp.PromptResponse{}, err
	}
	line, limit := 2, 1
	read, err := s.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: sid, Path: path, Line: &line, Limit: &limit})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	perm, err := s.conn.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: sid, ToolCall: acp.ToolCallUpdate{ToolCallId: "call-2", Title: acp.Ptr("run a command")},
		Options: []acp.PermissionOption{{Kind: acp.PermissionOptionKindRejectOnce, Name: "No", OptionId: "no"}, {Kind: acp.PermissionOptionKindAllowOnce, Name: "Yes", OptionId: "yes"}}})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	chosen := "cancelled"
	if perm.Outcome.Selected != nil {
		chosen = string(perm.Outcome.Selected.OptionId)
	}
	limitOut := 8
	term, err := s.conn.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: sid, Command: "printf 'abcdefghij'; cat sub/note.txt >/dev/null; exit 3", OutputByteLimit: &limitOut})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	exit, err := s.conn.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: sid, TerminalId: term.TerminalId})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	out, err := s.conn.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: sid, TerminalId: term.TerminalId})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	s.conn.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{SessionId: sid, TerminalId: term.TerminalId})
	// A long command, killed.
	long, err := s.conn.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: sid, Command: "sleep", Args: []string{"60"}})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	s.conn.KillTerminal(ctx, acp.KillTerminalRequest{SessionId: sid, TerminalId: long.TerminalId})
	killed, err := s.conn.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: sid, TerminalId: long.TerminalId})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	s.conn.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{SessionId: sid, TerminalId: long.TerminalId})
	_, released := s.conn.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: sid, TerminalId: long.TerminalId})
	say(acp.UpdateAgentMessageText(fmt.Sprintf("read=%q permission=%s exit=%d output=%q truncated=%v killed=%s released_error=%v",
		read.Content, chosen, *exit.ExitCode, out.Output, out.Truncated, deref(killed.Signal), released != nil)))
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

func (s *standIn) Cancel(ctx context.Context, p acp.CancelNotification) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	return nil
}

func (s *standIn) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (s *standIn) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}

func (s *standIn) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, nil
}

func (s *standIn) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, nil
}

func (s *standIn) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, nil
}

func (s *standIn) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

// waitGone waits until a process no longer exists.
func waitGone(pid int, within time.Duration) bool {
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if p, err := os.FindProcess(pid); err != nil || p.Signal(syscall.Signal(0)) != nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
