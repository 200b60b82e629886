package oneshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupebench/troupe/internal/childlog"
)

const (
	// stopGrace is how long a run gets after TERM before KILL.
	stopGrace = time.Second
	// answerKept bounds the standard output kept of a run: its end, where
	// the final answer is.
	answerKept = 256 << 10
)

// outcome is how one run of the agent ended.
type outcome struct {
	stdout    string
	lastWords string // its last stderr lines
	err       error  // nil: exit status 0
	stopped   bool   // ended by the bridge: the deadline or SIGTERM
	took      time.Duration
}

// runOnce runs the agent once, in its own process group, until it exits
// or ctx ends (then TERM, stopGrace, KILL). Whatever it left running in
// its group is killed when it returns.
func runOnce(ctx context.Context, path string, argv, env []string, dir string, stdin io.Reader, log *slog.Logger) outcome {
	start := time.Now()
	cmd := command(path, argv)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, env, stdin
	out := &tail{limit: answerKept}
	stderr := childlog.New(log)
	cmd.Stdout, cmd.Stderr = out, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Something it started may hold its output open after it exited.
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		return outcome{err: fmt.Errorf("start %s: %w", argv[0], err), took: time.Since(start)}
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	stopped := false
	select {
	case err = <-done:
	case <-ctx.Done():
		stopped = true
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(stopGrace):
			syscall.Kill(-pgid, syscall.SIGKILL)
			err = <-done
		}
	}
	// What it left in the background ends with the run.
	syscall.Kill(-pgid, syscall.SIGKILL)
	if err != nil {
		err = fmt.Errorf("%s exited (%w)", argv[0], err)
	}
	return outcome{stdout: out.String(), lastWords: stderr.Last(), err: err, stopped: stopped, took: time.Since(start)}
}

// describe says how a failed run ended, its last words included.
func (o outcome) describe() string {
	what := o.err.Error()
	if lw := strings.TrimSpace(o.lastWords); lw != "" {
		what += "; its last words: " + lastLines(lw, 5)
	} else {
		what += "; it wrote nothing on stderr"
	}
	return what
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// tail keeps the last limit bytes written to it.
type tail struct {
	limit int

	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	// Compacted only when twice over: each byte moves at most once.
	if len(t.buf) > 2*t.limit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.limit:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf[max(0, len(t.buf)-t.limit):]
	return strings.ToValidUTF8(string(b), "")
}
