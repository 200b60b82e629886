package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Limits of the tools.
const (
	shellDefaultTimeout = 2 * time.Minute
	shellMaxTimeout     = 15 * time.Minute
	outputCap           = 16 << 10 // shell output and file reads kept for the model
)

func spec(name, description string, properties map[string]any, required ...string) toolSpec {
	var s toolSpec
	s.Type = "function"
	s.Function.Name = name
	s.Function.Description = description
	s.Function.Parameters = map[string]any{"type": "object", "properties": properties, "required": required}
	return s
}

var str = map[string]any{"type": "string"}

// toolSpecs are the tools the model may call.
var toolSpecs = []toolSpec{
	spec("shell", "Run a command with sh -c in the working folder. Returns the exit status and the output (stdout and stderr, trimmed in the middle if long).",
		map[string]any{"command": str, "timeout_seconds": map[string]any{"type": "integer", "description": "default 120, at most 900"}}, "command"),
	spec("read_file", "Read a text file (a path relative to the working folder, or absolute).", map[string]any{"path": str}, "path"),
	spec("write_file", "Write a text file, creating its folders; replaces the file if it exists.", map[string]any{"path": str, "content": str}, "path", "content"),
	spec("list_dir", "List a folder: each entry's kind, size and name.", map[string]any{"path": str}),
	spec("send_message", "Send a message to the team channel. Only mentioned teammates are woken: give their ids or roles (or \"user\"). The orchestrator ends the trial with a message whose content starts with DONE:.",
		map[string]any{"content": str, "mentions": map[string]any{"type": "array", "items": str}}, "content", "mentions"),
}

// toolResult is what the model sees of a tool call, and what the log says.
type toolResult struct {
	content string
	failed  bool
}

// runTool executes one tool call.
func (a *Agent) runTool(ctx context.Context, name, rawArgs string) toolResult {
	if res, ok := a.task.call(ctx, name, rawArgs); ok {
		return res
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(rawArgs), &args); err != nil && rawArgs != "" {
		return toolResult{fmt.Sprintf("error: the arguments are not a JSON object: %v", err), true}
	}
	get := func(k string) string { s, _ := args[k].(string); return s }
	switch name {
	case "shell":
		timeout := shellDefaultTimeout
		if v, ok := args["timeout_seconds"].(float64); ok && v > 0 {
			// In seconds as a float, clamped before the conversion: 0.5
			// is not 0, and 1e10 does not overflow.
			timeout = time.Duration(min(max(v, 1), shellMaxTimeout.Seconds()) * float64(time.Second))
		}
		return a.shell(ctx, get("command"), timeout)
	case "read_file":
		text, err := readCapped(a.path(get("path")))
		if err != nil {
			return toolResult{"error: " + err.Error(), true}
		}
		return toolResult{text, false}
	case "write_file":
		p := a.path(get("path"))
		content, ok := args["content"].(string)
		if !ok {
			return toolResult{"error: content must be a string", true}
		}
		if info, err := os.Stat(p); err == nil && !info.Mode().IsRegular() {
			return toolResult{fmt.Sprintf("error: %s is not a regular file", p), true}
		}
		// Group-writable (the umask is 002): teammates share the group.
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			return toolResult{"error: " + err.Error(), true}
		}
		if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
			return toolResult{"error: " + err.Error(), true}
		}
		return toolResult{fmt.Sprintf("wrote %d bytes to %s", len(content), p), false}
	case "list_dir":
		p := a.path(cmp.Or(get("path"), "."))
		entries, err := os.ReadDir(p)
		if err != nil {
			return toolResult{"error: " + err.Error(), true}
		}
		var b strings.Builder
		for _, e := range entries {
			kind, size := "file", int64(0)
			if info, err := e.Info(); err == nil {
				size = info.Size()
			}
			if e.IsDir() {
				kind = "dir"
			}
			fmt.Fprintf(&b, "%s\t%d\t%s\n", kind, size, e.Name())
		}
		if b.Len() == 0 {
			return toolResult{"(empty)", false}
		}
		return toolResult{capText(b.String()), false}
	case "send_message":
		var mentions []string
		if list, ok := args["mentions"].([]any); ok {
			for _, m := range list {
				if s, ok := m.(string); ok {
					mentions = append(mentions, s)
				}
			}
		}
		if err := a.send(ctx, get("content"), mentions); err != nil {
			return toolResult{"error: " + err.Error(), true}
		}
		return toolResult{"sent", false}
	}
	names := make([]string, 0, len(a.task.allSpecs()))
	for _, s := range a.task.allSpecs() {
		names = append(names, s.Function.Name)
	}
	return toolResult{fmt.Sprintf("error: there is no tool %q; the tools are %s", name, strings.Join(names, ", ")), true}
}

func (a *Agent) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(a.cfg.Workdir, p)
}

// shell runs a command in its own process group, so that a timeout, the
// deadline or SIGTERM ends everything it started.
func (a *Agent) shell(ctx context.Context, command string, timeout time.Duration) toolResult {
	if strings.TrimSpace(command) == "" {
		return toolResult{"error: no command", true}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = a.cfg.Workdir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	out := &capWriter{}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	// Whatever the command left running in its group goes too.
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	code := 0
	if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
		code, err = exitErr.ExitCode(), nil
	}
	switch {
	case ctx.Err() != nil:
		return toolResult{fmt.Sprintf("error: the command did not finish within %s and was killed\n%s", timeout, out.String()), true}
	case errors.Is(err, exec.ErrWaitDelay):
		// The command exited, but something it started in the background
		// held its output open; that was stopped with the group.
		return toolResult{fmt.Sprintf("exit 0\n%s\n(a background process kept the output open and was stopped: every process a command starts ends with it)", out.String()), false}
	case err != nil:
		return toolResult{"error: " + err.Error(), true}
	}
	return toolResult{fmt.Sprintf("exit %d\n%s", code, out.String()), code != 0}
}

// capWriter keeps the first and the last outputCap/2 bytes of what is
// written, so a command printing gigabytes costs the agent no memory.
type capWriter struct {
	mu         sync.Mutex
	head, tail []byte
	total      int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	written := len(p)
	w.total += int64(written)
	half := outputCap / 2
	if room := half - len(w.head); room > 0 {
		n := min(room, len(p))
		w.head = append(w.head, p[:n]...)
		p = p[n:]
	}
	if len(p) > 0 {
		w.tail = append(w.tail, p...)
		if over := len(w.tail) - half; over > 0 {
			w.tail = append(w.tail[:0], w.tail[over:]...)
		}
	}
	return written, nil
}

func (w *capWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if left := w.total - int64(len(w.head)+len(w.tail)); left > 0 {
		return headTail(string(w.head), string(w.tail), left)
	}
	return string(w.head) + string(w.tail)
}

// readCapped reads a regular file (a device or a FIFO would never end, or
// block), at most its first and last outputCap/2 bytes.
func readCapped(path string) (string, error) {
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
	if info.Size() <= outputCap {
		data, err := io.ReadAll(io.LimitReader(f, outputCap+1))
		return capText(string(data)), err
	}
	half := int64(outputCap / 2)
	head := make([]byte, half)
	tail := make([]byte, half)
	if _, err := io.ReadFull(f, head); err != nil {
		return "", err
	}
	if _, err := f.ReadAt(tail, info.Size()-half); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return headTail(string(head), string(tail), info.Size()-2*half), nil
}

// capText keeps the start and the end of a long text.
func capText(s string) string {
	if len(s) <= outputCap {
		return s
	}
	half := outputCap / 2
	return headTail(s[:half], s[len(s)-half:], int64(len(s)-outputCap))
}

// headTail is how every capped text reads: its start, what was left out,
// its end.
func headTail(head, tail string, left int64) string {
	return head + fmt.Sprintf("\n… %d bytes left out …\n", left) + tail
}
