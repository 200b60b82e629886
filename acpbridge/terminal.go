package acpbridge

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/coder/acp-go-sdk"
)

// Bounds of terminal output: what terminal/create asks for, or the
// default, never more than the maximum.
const (
	terminalOutputDefault = 1 << 20
	terminalOutputMax     = 4 << 20
)

// terminals are the commands the child runs through terminal/*, each in
// its own process group in the working folder, as the bridge's uid.
type terminals struct {
	workdir string
	env     []string

	wg  sync.WaitGroup // one waiter per command
	mu  sync.Mutex
	seq int
	m   map[string]*terminal
}

type terminal struct {
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when the command has exited
	exit *acp.TerminalExitStatus
}

func newTerminals(workdir string, env []string) *terminals {
	return &terminals{workdir: workdir, env: env, m: map[string]*terminal{}}
}

// create starts a command. Without arguments, the command is a shell
// line (sh -c): agents send both forms.
func (ts *terminals) create(p acp.CreateTerminalRequest) (string, error) {
	var cmd *exec.Cmd
	if len(p.Args) == 0 {
		cmd = exec.Command("sh", "-c", p.Command)
	} else {
		cmd = exec.Command(p.Command, p.Args...)
	}
	cmd.Dir = ts.workdir
	if p.Cwd != nil && *p.Cwd != "" {
		cmd.Dir = resolve(ts.workdir, *p.Cwd)
	}
	cmd.Env = ts.env
	for _, e := range p.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	limit := terminalOutputDefault
	if p.OutputByteLimit != nil && *p.OutputByteLimit > 0 {
		limit = min(*p.OutputByteLimit, terminalOutputMax)
	}
	t := &terminal{cmd: cmd, out: &tailBuffer{limit: limit}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = t.out, t.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A background process holding the output open must not hold the
	// command's exit back for long.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return "", err
	}
	ts.mu.Lock()
	ts.seq++
	id := "term-" + strconv.Itoa(ts.seq)
	ts.m[id] = t
	ts.mu.Unlock()
	ts.wg.Go(func() {
		cmd.Wait()
		st := &acp.TerminalExitStatus{}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.Signal = acp.Ptr(signalName(ws.Signal()))
		} else {
			st.ExitCode = acp.Ptr(cmd.ProcessState.ExitCode())
		}
		t.exit = st
		close(t.done)
	})
	return id, nil
}

func (ts *terminals) get(id string) (*terminal, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[id]
	if !ok {
		return nil, fmt.Errorf("no terminal %q (released, or never created)", id)
	}
	return t, nil
}

func (ts *terminals) output(id string) (acp.TerminalOutputResponse, error) {
	t, err := ts.get(id)
	if err != nil {
		return acp.TerminalOutputResponse{}, err
	}
	out, truncated := t.out.Output()
	resp := acp.TerminalOutputResponse{Output: out, Truncated: truncated}
	select {
	case <-t.done:
		resp.ExitStatus = t.exit
	default:
	}
	return resp, nil
}

func (ts *terminals) wait(ctx context.Context, id string) (acp.WaitForTerminalExitResponse, error) {
	t, err := ts.get(id)
	if err != nil {
		return acp.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-t.done:
		return acp.WaitForTerminalExitResponse{ExitCode: t.exit.ExitCode, Signal: t.exit.Signal}, nil
	case <-ctx.Done():
		return acp.WaitForTerminalExitResponse{}, ctx.Err()
	}
}

// kill ends the command and everything it started; the terminal stays,
// for its output.
func (ts *terminals) kill(id string) error {
	t, err := ts.get(id)
	if err != nil {
		return err
	}
	t.kill()
	return nil
}

func (ts *terminals) release(id string) error {
	ts.mu.Lock()
	t, ok := ts.m[id]
	delete(ts.m, id)
	ts.mu.Unlock()
	if !ok {
		return fmt.Errorf("no terminal %q (released, or never created)", id)
	}
	t.kill()
	return nil
}

func (t *terminal) kill() {
	// The group: whatever the command started goes with it. It may be
	// gone already; that is fine.
	if err := syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.cmd.Process.Kill()
	}
}

// Close kills every command still running and waits for them.
func (ts *terminals) Close() {
	ts.mu.Lock()
	for id, t := range ts.m {
		t.kill()
		delete(ts.m, id)
	}
	ts.mu.Unlock()
	ts.wg.Wait()
}

// resolve makes a path the child gives absolute: relative to the working
// folder (ACP asks for absolute paths; agents do not always send them).
func resolve(workdir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(workdir, p)
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return s.String()
}
