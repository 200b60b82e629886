package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/troupebench/troupe/runtime"
)

// errDetached is the exit error of a process that Close stopped following.
var errDetached = errors.New("stopped following the process before it exited")

// process follows one exec: a goroutine demultiplexes its output to the
// caller's writers until the stream ends, which is the process's exit.
type process struct {
	d      *Docker
	execID string
	cmd    []string
	att    types.HijackedResponse
	stdin  io.WriteCloser
	done   chan struct{}
	wg     sync.WaitGroup
	head   runtime.OutputHead

	closeOnce sync.Once
	detached  atomic.Bool // Close stopped following before the stream ended

	code int
	err  error
}

var _ runtime.Process = (*process)(nil)

// Exec runs a process in a started container with its output attached.
func (d *Docker) Exec(ctx context.Context, id string, spec runtime.ExecSpec) (runtime.Process, error) {
	created, err := d.cli.ContainerExecCreate(ctx, id, container.ExecOptions{
		Cmd: spec.Cmd, Env: spec.Env, User: spec.User, WorkingDir: spec.WorkDir,
		AttachStdin: spec.Stdin, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("docker: exec %s in %s: %w", strings.Join(spec.Cmd, " "), short(id), err)
	}
	att, err := d.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("docker: attach to exec in %s: %w", short(id), err)
	}
	p := &process{d: d, execID: created.ID, cmd: spec.Cmd, att: att, done: make(chan struct{})}
	if spec.Stdin {
		p.stdin = &stdinWriter{att: att}
	}
	stdout, stderr := orDiscard(spec.Stdout), orDiscard(spec.Stderr)
	p.wg.Go(func() {
		defer close(p.done)
		_, copyErr := stdcopy.StdCopy(io.MultiWriter(stdout, &p.head), io.MultiWriter(stderr, &p.head), att.Reader)
		p.finish(copyErr)
	})
	return p, nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// finish reads the exit code once the output stream has ended. The engine
// can report the exec as running for a moment after its stream closes, so
// it asks a few times, briefly.
func (p *process) finish(copyErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		info, err := p.d.cli.ContainerExecInspect(ctx, p.execID)
		switch {
		case err != nil:
			p.code, p.err = -1, fmt.Errorf("docker: exit status of %s: %w", strings.Join(p.cmd, " "), err)
			return
		case !info.Running:
			p.code = info.ExitCode
			p.err = runtime.ClassifyExit(p.cmd, info.ExitCode, p.head.String())
			return
		case p.detached.Load() || attempt == 50:
			p.code, p.err = -1, errDetached
			if copyErr != nil && !p.detached.Load() {
				p.err = fmt.Errorf("docker: following %s: %w", strings.Join(p.cmd, " "), copyErr)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Done() <-chan struct{} { return p.done }

func (p *process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.code, p.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Close detaches: the output stream is closed, the goroutine following it
// ends, and Close waits for it.
func (p *process) Close() error {
	p.closeOnce.Do(func() {
		select {
		case <-p.done:
		default:
			p.detached.Store(true)
		}
		p.att.Close()
	})
	p.wg.Wait()
	return nil
}

// stdinWriter writes to the exec's input; Close half-closes the connection
// so the process reads end-of-file while its output keeps flowing.
type stdinWriter struct {
	att  types.HijackedResponse
	once sync.Once
}

func (s *stdinWriter) Write(b []byte) (int, error) { return s.att.Conn.Write(b) }

func (s *stdinWriter) Close() error {
	var err error
	s.once.Do(func() { err = s.att.CloseWrite() })
	return err
}
