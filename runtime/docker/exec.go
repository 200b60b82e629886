package docker

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/execstream"
)

// Exec runs a process in the started container with its output attached:
// the engine's multiplexed stream is demultiplexed to the spec's writers
// until it ends, which is the process's exit.
func (c *Container) Exec(ctx context.Context, spec runtime.ExecSpec) (runtime.Process, error) {
	created, err := c.d.cli.ContainerExecCreate(ctx, c.id, container.ExecOptions{
		Cmd: spec.Cmd, Env: spec.Env, User: spec.User, WorkingDir: spec.WorkDir,
		AttachStdin: spec.Stdin, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("docker: exec %s in %s: %w", strings.Join(spec.Cmd, " "), short(c.id), err)
	}
	att, err := c.d.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("docker: attach to exec in %s: %w", short(c.id), err)
	}
	var stdin io.WriteCloser
	if spec.Stdin {
		stdin = &stdinWriter{att: att}
	}
	p := execstream.New(stdin)
	p.Follow(spec.Stdout, spec.Stderr, func(stdout, stderr io.Writer) (int, error) {
		_, copyErr := stdcopy.StdCopy(stdout, stderr, att.Reader)
		return c.d.exitCode(context.WithoutCancel(ctx), created.ID, spec.Cmd, copyErr, p)
	}, func() { att.Close() })
	return p, nil
}

// exitCode reads the exit code once the output stream has ended, within
// ten seconds of ctx (the exec's, its cancellation removed: the exit is
// read however the caller's wait ended). The engine can report the exec as
// running for a moment after its stream closes, so it asks a few times,
// briefly.
func (d *Docker) exitCode(ctx context.Context, execID string, cmd []string, copyErr error, p *execstream.Process) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		info, err := d.cli.ContainerExecInspect(ctx, execID)
		switch {
		case err != nil:
			return -1, fmt.Errorf("docker: exit status of %s: %w", strings.Join(cmd, " "), err)
		case !info.Running:
			return info.ExitCode, runtime.ClassifyExit(cmd, info.ExitCode, p.Output())
		case p.Detached() || attempt == 50:
			if copyErr != nil && !p.Detached() {
				return -1, fmt.Errorf("docker: following %s: %w", strings.Join(cmd, " "), copyErr)
			}
			return -1, execstream.ErrDetached
		}
		time.Sleep(20 * time.Millisecond)
	}
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
