// Package execstream follows a running exec for a backend: the exec's
// output goes to the caller's writers as it arrives, the first of it is
// kept to explain a command that could not run, its end is an event
// (Done), its exit is read once, and Close stops following and waits for
// the goroutine that did. runtime/docker and runtime/kubernetes each run
// an exec's stream their own way; what they do around it is this
// package's Process, a runtime.Process.
package execstream

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/troupebench/troupe/runtime"
)

// ErrDetached is the exit error of a process that Close stopped following
// before it exited.
var ErrDetached = errors.New("stopped following the process before it exited")

// headSize is how much of an exec's output Head keeps.
const headSize = 512

// Head keeps the first 512 bytes written to it: a backend's copy of an
// exec's output, to explain it when the exec could not run its command
// (runtime.ClassifyExit). It is safe for both output streams at once.
type Head struct {
	mu sync.Mutex
	b  []byte
}

func (h *Head) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := headSize - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *Head) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.b)
}

// Process is a running exec as a backend follows it. Make it with New,
// then start following with Follow; it is a runtime.Process.
type Process struct {
	stdin io.WriteCloser
	head  Head
	done  chan struct{}
	wg    sync.WaitGroup

	stop      func()
	closeOnce sync.Once
	detached  atomic.Bool // Close came before the stream ended

	code int
	err  error
}

var _ runtime.Process = (*Process)(nil)

// New makes the Process of an exec whose standard input is stdin (nil
// when it has none: Stdin then returns nil).
func New(stdin io.WriteCloser) *Process {
	return &Process{stdin: stdin, done: make(chan struct{})}
}

// Follow starts following the exec, once: follow runs in a goroutine the
// Process owns, copies the exec's stream to stdout and stderr (nil
// discards; both also feed Output) until it ends, and returns the exit
// code and, when there is one, why the exit is not the command's own.
// Done is closed when follow has returned. stop cuts the stream: Close
// calls it when it comes first, and follow must then return.
func (p *Process) Follow(stdout, stderr io.Writer, follow func(stdout, stderr io.Writer) (int, error), stop func()) {
	p.stop = stop
	stdout = io.MultiWriter(orDiscard(stdout), &p.head)
	stderr = io.MultiWriter(orDiscard(stderr), &p.head)
	p.wg.Go(func() {
		defer close(p.done)
		p.code, p.err = follow(stdout, stderr)
	})
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Output is the first 512 bytes of the exec's output so far, both streams
// as they came.
func (p *Process) Output() string { return p.head.String() }

// Detached reports whether Close stopped following before the stream
// ended: an exit read after that is not the process's.
func (p *Process) Detached() bool { return p.detached.Load() }

// Stdin is the process's standard input, nil when it has none; closing it
// sends end-of-file.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Done is closed when the process has exited and all its output has been
// written.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for Done and returns the exit code and error follow gave, or
// -1 and ctx's error when ctx ends first.
func (p *Process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.code, p.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Close stops following: the stream is cut (once), the goroutine
// following it ends, and Close waits for it. The process itself keeps
// running until swept or removed.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		select {
		case <-p.done:
		default:
			p.detached.Store(true)
		}
		if p.stop != nil {
			p.stop()
		}
	})
	p.wg.Wait()
	return nil
}
