package acpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/coder/acp-go-sdk"
	"github.com/troupebench/troupe/internal/clip"
)

// client answers the child's side of ACP: its files, its terminals, its
// permission requests, and the stream of session updates, which it
// records and keeps the turn's text of.
type client struct {
	workdir string
	policy  Permission
	log     *slog.Logger
	terms   *terminals
	text    turnText
}

var _ acp.Client = (*client)(nil)

// maxReadFile bounds a file read through fs/read_text_file: the whole
// answer is one line of JSON-RPC, which the child's SDK may not take much
// bigger (the Go SDK's limit is 10 MiB).
const maxReadFile = 4 << 20

func (c *client) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	path := resolve(c.workdir, p.Path)
	content, err := readLines(path, p.Line, p.Limit)
	c.log.Info("fs/read_text_file", "path", path, "bytes", len(content), "failed", err != nil)
	if err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	return acp.ReadTextFileResponse{Content: content}, nil
}

// readLines reads a regular file, or from line (1-based) at most limit
// lines of it.
func readLines(path string, line, limit *int) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if line == nil && limit == nil {
		if info.Size() > maxReadFile {
			return "", fmt.Errorf("%s is %d bytes, over the %d one read returns: read it by line and limit", path, info.Size(), maxReadFile)
		}
		data, err := io.ReadAll(io.LimitReader(f, maxReadFile+1))
		return string(data), err
	}
	first := 1
	if line != nil && *line > 1 {
		first = *line
	}
	var b strings.Builder
	r := bufio.NewReader(f)
	for n, taken := 1, 0; limit == nil || *limit <= 0 || taken < *limit; n++ {
		s, err := r.ReadString('\n')
		if n >= first && s != "" {
			if b.Len()+len(s) > maxReadFile {
				return "", fmt.Errorf("the lines asked of %s are over the %d bytes one read returns: ask fewer", path, maxReadFile)
			}
			b.WriteString(s)
			taken++
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

func (c *client) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	path := resolve(c.workdir, p.Path)
	err := writeFile(path, p.Content)
	c.log.Info("fs/write_text_file", "path", path, "bytes", len(p.Content), "failed", err != nil)
	return acp.WriteTextFileResponse{}, err
}

// writeFile writes a regular file, creating its folders, group-writable
// as the umask (002) leaves it: teammates share the group.
func writeFile(path, content string) error {
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o666)
}

func (c *client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	out := choosePermission(c.policy, p.Options)
	chosen := "cancelled"
	if out.Selected != nil {
		chosen = string(out.Selected.OptionId)
	}
	title := ""
	if p.ToolCall.Title != nil {
		title = *p.ToolCall.Title
	}
	var offered []string
	for _, o := range p.Options {
		offered = append(offered, fmt.Sprintf("%s (%s)", o.OptionId, o.Kind))
	}
	c.log.Info("session/request_permission", "tool_call", p.ToolCall.ToolCallId, "title", title, "options", strings.Join(offered, ", "),
		"policy", string(c.policy), "chosen", chosen)
	return acp.RequestPermissionResponse{Outcome: out}, nil
}

// choosePermission picks the option the policy wants: under Allow, an
// allow option (once before always); under Deny, a reject option. When
// none is offered, the request is answered as cancelled, which allows
// nothing.
func choosePermission(policy Permission, options []acp.PermissionOption) acp.RequestPermissionOutcome {
	prefer := []acp.PermissionOptionKind{acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways}
	if policy == Deny {
		prefer = []acp.PermissionOptionKind{acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways}
	}
	for _, kind := range prefer {
		for _, o := range options {
			if o.Kind == kind {
				return acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}
			}
		}
	}
	return acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}
}

// SessionUpdate records an update as one JSON line, and keeps the turn's
// text.
func (c *client) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	raw, err := json.Marshal(n.Update)
	if err != nil {
		return err
	}
	var head struct {
		Kind string `json:"sessionUpdate"`
	}
	json.Unmarshal(raw, &head)
	c.log.Info("session/update", "kind", head.Kind, "update", json.RawMessage(raw))
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil:
		if t := u.AgentMessageChunk.Content.Text; t != nil {
			c.text.add(t.Text)
		}
	case u.ToolCall != nil:
		c.text.toolCall()
	}
	return nil
}

func (c *client) CreateTerminal(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	id, err := c.terms.create(p)
	c.log.Info("terminal/create", "terminal", id, "command", clip.Head(p.Command, 300), "args", clip.Head(strings.Join(p.Args, " "), 300), "failed", err != nil)
	return acp.CreateTerminalResponse{TerminalId: id}, err
}

func (c *client) TerminalOutput(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return c.terms.output(p.TerminalId)
}

func (c *client) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	resp, err := c.terms.wait(ctx, p.TerminalId)
	if err == nil {
		code := -1
		if resp.ExitCode != nil {
			code = *resp.ExitCode
		}
		c.log.Info("terminal/wait_for_exit", "terminal", p.TerminalId, "exit_code", code, "signal", deref(resp.Signal))
	}
	return resp, err
}

func (c *client) KillTerminal(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	c.log.Info("terminal/kill", "terminal", p.TerminalId)
	return acp.KillTerminalResponse{}, c.terms.kill(p.TerminalId)
}

func (c *client) ReleaseTerminal(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, c.terms.release(p.TerminalId)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// turnText is the agent's text of the current turn: all of it, and the
// part since its last tool call, its final answer.
type turnText struct {
	mu         sync.Mutex
	all, final strings.Builder
}

// maxAnswer bounds the text posted for an agent, in characters: the relay
// takes messages of at most 64 KiB.
const maxAnswer = 12 << 10

func (t *turnText) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.all.Len() < 4*maxAnswer {
		t.all.WriteString(s)
	}
	if t.final.Len() < 4*maxAnswer {
		t.final.WriteString(s)
	}
}

func (t *turnText) toolCall() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.final.Reset()
}

// reset starts a turn.
func (t *turnText) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.all.Reset()
	t.final.Reset()
}

// answer is the turn's final text: what the agent said after its last
// tool call, or, when that is nothing, all it said.
func (t *turnText) answer() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(t.final.String())
	if s == "" {
		s = strings.TrimSpace(t.all.String())
	}
	return clip.Head(s, maxAnswer)
}
