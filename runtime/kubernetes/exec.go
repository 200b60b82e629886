package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/execstream"
	"github.com/troupebench/troupe/runtime/inside"
)

// process is an exec as a pod runs it: followed as on Docker
// (execstream), with the caller's writers shut when Close returns.
type process struct {
	*execstream.Process
	out *gate // the caller's writers, shut by Close
}

var _ runtime.Process = (*process)(nil)

// Exec runs a process in the started pod's main container. A Kubernetes
// exec runs as the container's user, in its folder, with its environment,
// so every exec runs through troupe exec-as, which does what Docker would;
// the environment goes on standard input (--env-stdin), never in the exec
// request's URL or the command line. The stream is a WebSocket, or SPDY
// where the apiserver or a proxy between does not take WebSockets.
func (p *pod) Exec(ctx context.Context, spec runtime.ExecSpec) (runtime.Process, error) {
	if len(spec.Cmd) == 0 {
		return nil, errors.New("kubernetes: exec: no command")
	}
	id := p.name
	needStdin := spec.Stdin || len(spec.Env) > 0
	exec, err := p.k.executor(id, execAs(spec), needStdin)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var opts remotecommand.StreamOptions
	var in *io.PipeReader
	var w *io.PipeWriter
	var stdin io.WriteCloser // the caller's, when ExecSpec.Stdin
	if needStdin {
		in, w = io.Pipe()
		opts.Stdin = in
		if spec.Stdin {
			stdin = w
		}
	}
	proc := &process{Process: execstream.New(stdin), out: &gate{}}
	proc.Follow(proc.out.writer(spec.Stdout), proc.out.writer(spec.Stderr), func(stdout, stderr io.Writer) (int, error) {
		opts.Stdout, opts.Stderr = stdout, stderr
		err := exec.StreamWithContext(sctx, opts)
		if in != nil {
			// Nothing reads it any more: a write waiting on it fails.
			in.CloseWithError(errors.Join(errors.New("the exec has ended"), err))
		}
		return exitOf(sctx, err, spec.Cmd, proc.Output(), id)
	}, func() {
		cancel()
		if spec.Stdin {
			w.CloseWithError(execstream.ErrDetached)
		}
	})
	if len(spec.Env) > 0 {
		// A stream that cannot start ends the write with its error; Wait
		// says why.
		if inside.WriteEnvPreamble(w, spec.Env) != nil || !spec.Stdin {
			w.Close()
		}
	}
	return proc, nil
}

// Close stops following, as execstream's does; then the caller's writers
// get nothing more, even from a stream that is still winding down.
func (p *process) Close() error {
	err := p.Process.Close()
	p.out.close()
	return err
}

// execAs is the command that runs spec through troupe exec-as: as its user,
// in its folder, with its environment (sent on standard input), and with a
// command that cannot be run told by its exit code (127 not found, 126 not
// executable), as with Docker, rather than by the container runtime's
// words.
func execAs(spec runtime.ExecSpec) []string {
	cmd := []string{runtime.BinaryPath, "exec-as"}
	if spec.User != "" {
		cmd = append(cmd, "--user", spec.User)
	}
	if spec.WorkDir != "" {
		cmd = append(cmd, "--workdir", spec.WorkDir)
	}
	if len(spec.Env) > 0 {
		cmd = append(cmd, "--env-stdin")
	}
	return append(append(cmd, "--"), spec.Cmd...)
}

// gate passes writes to the caller's writers until Close shuts it: after
// Close returns, nothing more is written to them, even by a stream that is
// still winding down.
type gate struct {
	mu   sync.Mutex
	shut bool
}

func (g *gate) writer(w io.Writer) io.Writer {
	if w == nil {
		w = io.Discard
	}
	return writerFunc(func(b []byte) (int, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.shut {
			return len(b), nil
		}
		return w.Write(b)
	})
}

func (g *gate) close() {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// executor makes the exec request's stream: WebSocket first, SPDY when the
// upgrade to it fails.
func (k *Kubernetes) executor(id string, cmd []string, stdin bool) (remotecommand.Executor, error) {
	req := k.cs.CoreV1().RESTClient().Post().Resource("pods").Name(id).Namespace(k.namespace).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: mainContainer, Command: cmd, Stdin: stdin, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(k.cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("kubernetes: exec in %s: %w", id, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(k.cfg, http.MethodPost, req.URL())
	if err != nil {
		return nil, fmt.Errorf("kubernetes: exec in %s: %w", id, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: exec in %s: %w", id, err)
	}
	return exec, nil
}

// exitOf reads an exec's exit from its stream's end: nil is 0, a
// CodeExitError its code (126 and 127 explained), a cut stream -1.
func exitOf(ctx context.Context, err error, cmd []string, output, id string) (int, error) {
	if err == nil {
		return 0, nil
	}
	if ce, ok := errors.AsType[utilexec.CodeExitError](err); ok {
		return ce.Code, runtime.ClassifyExit(cmd, ce.Code, output)
	}
	if ctx.Err() != nil {
		return -1, execstream.ErrDetached
	}
	return -1, fmt.Errorf("kubernetes: exec %s in %s: %w", strings.Join(cmd, " "), id, err)
}

// run runs a command of troupe's in the pod as root to its end, with in
// as its input, and returns its output.
func (k *Kubernetes) run(ctx context.Context, id string, cmd []string, in io.Reader, out io.Writer) error {
	var stderr bytes.Buffer
	exec, err := k.executor(id, cmd, in != nil)
	if err != nil {
		return err
	}
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: in, Stdout: out, Stderr: &stderr})
	if err != nil {
		return fmt.Errorf("kubernetes: %s in %s: %w: %s", strings.Join(cmd[1:], " "), id, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// CopyIn writes files into the pod: kept until Start when it has not
// started, else unpacked at once.
func (p *pod) CopyIn(ctx context.Context, files []runtime.File) error {
	if err := p.gone(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		p.files = append(p.files, files...)
		return nil
	}
	return p.k.unpack(ctx, p.name, files)
}

// unpack writes files in as one tar stream through troupe call prepare,
// which keeps their owners and modes.
func (k *Kubernetes) unpack(ctx context.Context, id string, files []runtime.File) error {
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { pw.CloseWithError(runtime.WriteTar(pw, files)) })
	err := k.run(ctx, id, []string{runtime.BinaryPath, "call", "prepare", "{}"}, pr, io.Discard)
	pr.CloseWithError(errors.New("copy ended"))
	wg.Wait()
	if err != nil {
		return fmt.Errorf("kubernetes: copy %d files into %s: %w", len(files), id, err)
	}
	return nil
}

// CopyOut copies src out of the pod into dst under dstPath: troupe call
// pack's archive of it, extracted by runtime.ExtractTar.
func (p *pod) CopyOut(ctx context.Context, src string, dst *os.Root, dstPath string, limit int64) (skipped []string, err error) {
	k, id := p.k, p.name
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() {
		runErr = k.run(ctx, id, []string{runtime.BinaryPath, "call", "pack", src}, nil, pw)
		pw.CloseWithError(runErr)
	})
	skipped, err = runtime.ExtractTar(pr, src, dst, dstPath, limit)
	pr.CloseWithError(errors.New("copy ended"))
	wg.Wait()
	if err == nil {
		err = runErr
	}
	if err != nil {
		return skipped, fmt.Errorf("kubernetes: copy %s out of %s: %w", src, id, err)
	}
	return skipped, nil
}
