package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/troupebench/troupe/runtime"
)

// Execer is what a tunnel needs of its container: an exec
// (runtime.Container has it).
type Execer interface {
	Exec(ctx context.Context, spec runtime.ExecSpec) (runtime.Process, error)
}

// Tunnel is a running tunnel: `troupe tunnel` in a container, served on the
// host. Make it with New, start it with Open, end it with Close.
type Tunnel struct {
	c      Execer
	cmd    []string
	proc   runtime.Process
	sess   *yamux.Session
	ready  chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stderr bytes.Buffer
	host   *host
	mu     sync.Mutex
	err    error
}

// New makes the host end of a tunnel into container c: `binary tunnel
// --listen ADDR=NAME...` to run there, and the targets its streams name
// dialled with dial within opts' bounds. It does no I/O; Open starts it.
func New(c Execer, binary string, listens []Listen, dial Dialer, opts Options) *Tunnel {
	cmd := []string{binary, "tunnel"}
	for _, l := range listens {
		cmd = append(cmd, "--listen", l.Addr+"="+l.Name)
	}
	return &Tunnel{c: c, cmd: cmd, ready: make(chan struct{}), host: newHost(dial, opts)}
}

// Open starts the container end in the (started) container and serves the
// host end until Close, on a context of its own that ctx's cancellation
// does not end. Use WaitReady to wait until the container end listens. A
// tunnel that failed to open has nothing left running.
func (t *Tunnel) Open(ctx context.Context) error {
	pr, pw := io.Pipe()
	proc, err := t.c.Exec(ctx, runtime.ExecSpec{Cmd: t.cmd, Stdin: true, Stdout: pw, Stderr: &lockedWriter{mu: &t.mu, w: &t.stderr}})
	if err != nil {
		return fmt.Errorf("tunnel: start %s: %w", strings.Join(t.cmd, " "), err)
	}
	hostCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// The process's end is the stream's end.
	t.wg.Go(func() {
		<-proc.Done()
		pw.CloseWithError(io.EOF)
	})
	sess, err := yamux.Server(Duplex{In: pr, Out: proc.Stdin()}, config())
	if err != nil {
		cancel()
		proc.Stdin().Close()
		pw.Close()
		proc.Close()
		t.wg.Wait()
		return fmt.Errorf("tunnel: %w", err)
	}
	t.proc, t.sess, t.cancel = proc, sess, cancel
	t.wg.Go(func() {
		err := t.host.serve(hostCtx, sess, t.ready)
		t.mu.Lock()
		t.err = err
		t.mu.Unlock()
	})
	return nil
}

// Call runs a handler of the container end (see Handler) with arg and in,
// and returns what it wrote; its error when it failed. It needs no exec: the
// call travels in the tunnel's own stream.
func (t *Tunnel) Call(ctx context.Context, name, arg string, in []byte) ([]byte, error) {
	if strings.ContainsAny(name+arg, "\n") || strings.Contains(name, " ") {
		return nil, fmt.Errorf("tunnel: call %q: a name without spaces and an argument on one line", name)
	}
	s, err := t.sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("tunnel: call %s: %w", name, err)
	}
	defer s.Close()
	// A cancelled call stops reading at once.
	stop := context.AfterFunc(ctx, func() { s.SetDeadline(time.Now()) })
	defer stop()
	if _, err := fmt.Fprintf(s, "%s %s\n", name, arg); err != nil {
		return nil, fmt.Errorf("tunnel: call %s: %w", name, err)
	}
	if _, err := s.Write(in); err != nil {
		return nil, fmt.Errorf("tunnel: call %s: %w", name, err)
	}
	s.Close() // the end of the input; the answer still comes
	resp, err := io.ReadAll(s)
	if err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return nil, fmt.Errorf("tunnel: call %s: %w", name, err)
	}
	status, out, _ := bytes.Cut(resp, []byte("\n"))
	switch {
	case string(status) == "ok":
		return out, nil
	case bytes.HasPrefix(status, []byte("error ")):
		return nil, fmt.Errorf("tunnel: call %s: %s", name, status[len("error "):])
	}
	return nil, fmt.Errorf("tunnel: call %s: no answer (the container end may have exited)", name)
}

// WaitReady waits until the container end listens, the tunnel ends, or ctx
// ends; the error says which and what the tunnel printed.
func (t *Tunnel) WaitReady(ctx context.Context) error {
	select {
	case <-t.ready:
		return nil
	case <-t.proc.Done():
		_, err := t.proc.Wait(ctx)
		return fmt.Errorf("tunnel ended before it listened: %v; it said: %s", err, strings.TrimSpace(t.Stderr()))
	case <-ctx.Done():
		return fmt.Errorf("tunnel not listening yet: %w; it said: %s", context.Cause(ctx), strings.TrimSpace(t.Stderr()))
	}
}

// Stats counts the streams the host end served and refused so far.
func (t *Tunnel) Stats() Stats { return t.host.snapshot() }

// Done is closed when the tunnel process has exited.
func (t *Tunnel) Done() <-chan struct{} { return t.proc.Done() }

// Stderr is what the container end printed.
func (t *Tunnel) Stderr() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stderr.String()
}

// Close ends the tunnel: the session closes, the container end sees its
// input end and exits; Close waits for all of it, up to ten seconds for the
// process, whether or not ctx is cancelled (it is cleanup). A tunnel never
// opened has nothing to close.
func (t *Tunnel) Close(ctx context.Context) error {
	if t.proc == nil {
		return nil
	}
	t.cancel()
	if s := t.proc.Stdin(); s != nil {
		s.Close()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, werr := t.proc.Wait(ctx)
	if errors.Is(werr, context.DeadlineExceeded) {
		werr = fmt.Errorf("tunnel process still running after its input closed")
	} else {
		werr = nil // how the process ended after Close does not matter
	}
	perr := t.proc.Close()
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	return errors.Join(t.err, werr, perr)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
