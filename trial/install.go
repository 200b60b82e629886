package trial

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/tunnel"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trialdir"
)

// ErrInstall is a stack's install script that failed: it exited non-zero,
// did not end in time, or could not be run.
const ErrInstall ErrorKind = "InstallError"

// Labels on the image an install makes, beside the runtime's own.
const (
	labelStack       = "troupe.stack"
	labelStackDigest = "troupe.stack-digest"
)

// imageCommitter is what caching installs needs of a backend beyond
// Backend; runtime/docker implements it.
type imageCommitter interface {
	// CommitOnce returns the image made for spec (one per base image ID
	// and key) or, when there is none yet, calls run, which makes a
	// container from spec.Base and returns it, and commits that
	// container: made says so. One call per image runs at a time. run's
	// container is the caller's to remove.
	CommitOnce(ctx context.Context, spec runtime.CommitSpec, run func(context.Context) (runtime.Container, error)) (img runtime.Image, made bool, err error)
}

// installStacks are the agents' stacks that have an install script, each
// once, in the agents' order.
func (r *run) installStacks() []*stack.Stack {
	var out []*stack.Stack
	seen := map[string]bool{}
	for _, ar := range r.agents {
		if st := ar.stack; st != nil && st.Install != nil && !seen[st.Name] {
			seen[st.Name] = true
			out = append(out, st)
		}
	}
	return out
}

// install gives the trial the images of its stacks' install scripts: r.img
// becomes the last, made from the task's image (or the previous stack's)
// once per image and stack digest, by the first trial that needs it. A
// script runs in a container of its own, with troupe's binary, the stack's
// files and the agents' network, and nothing of the trial's: no key, token,
// prompt or task variable, since its filesystem becomes an image that
// other trials start from.
func (r *run) install(ctx context.Context) (ErrorKind, error) {
	stacks := r.installStacks()
	if len(stacks) == 0 {
		return "", nil
	}
	ic, ok := r.env.Runtime.(imageCommitter)
	if !ok {
		return ErrInstall, fmt.Errorf("stack %s has an install script, but the %s runtime cannot keep what it installs as an image: run it with --runtime docker, or use an image with the stack installed (docs/stacks.md)", stacks[0].Name, r.env.Runtime.Name())
	}
	for _, st := range stacks {
		rec := trialdir.InstallRecord{Stack: st.Name, StackDigest: st.Digest(), TimeoutSec: r.installTimeout(st).Seconds()}
		start := time.Now()
		var c runtime.Container
		img, made, err := ic.CommitOnce(ctx, runtime.CommitSpec{Base: r.img.Ref, Key: rec.StackDigest, Labels: map[string]string{
			runtime.LabelJob: r.env.JobID, runtime.LabelTrial: r.id, labelStack: st.Name, labelStackDigest: rec.StackDigest,
		}}, func(ctx context.Context) (runtime.Container, error) {
			var err error
			c, err = r.runInstall(ctx, st, &rec)
			return c, err
		})
		if c != nil {
			if rerr := c.Remove(ctx); rerr != nil {
				r.cleanupError("remove the install container of stack "+st.Name, rerr)
			}
		}
		rec.DurationSec = time.Since(start).Seconds()
		if err == nil {
			rec.Image, rec.Cached = img.Ref, !made
		}
		r.res.Installs = append(r.res.Installs, rec)
		if err != nil {
			return ErrInstall, err
		}
		r.log.Info("install", "stack", st.Name, "image", img.Ref, "ran", made, "seconds", rec.DurationSec)
		r.img.Ref = img.Ref
	}
	return "", nil
}

func (r *run) installTimeout(st *stack.Stack) time.Duration {
	return r.env.Limits.scale(cmp.Or(st.InstallTimeout, stack.DefaultInstallTimeout))
}

// runInstall runs a stack's install script in a new container of r.img and
// returns the container, for the runtime to commit and the caller to
// remove (also after an error).
func (r *run) runInstall(ctx context.Context, st *stack.Stack, rec *trialdir.InstallRecord) (runtime.Container, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	script, err := st.InstallScript()
	if err != nil {
		return nil, err
	}
	files, err := st.Verify()
	if err != nil {
		return nil, err
	}
	nw := r.agentNet()
	recorded := recordedNetwork(nw)
	rec.Network = &recorded
	rec.Log = trialdir.InstallLog(st.Name)
	out, err := r.openSink(rec.Log, r.env.bounds().AgentOutput)
	if err != nil {
		return nil, err
	}
	c, err := r.createInstall(ctx, st, nw)
	if err != nil {
		return nil, fmt.Errorf("install stack %s: %w", st.Name, err)
	}
	fmt.Fprintf(out, "troupe: installing stack %s (%s) in a container of %s, network %s\n", st.Name, rec.StackDigest, r.img.Ref, nw.Mode)
	if err := c.CopyIn(ctx, append(files, script)); err != nil {
		return c, fmt.Errorf("install stack %s: %w", st.Name, err)
	}
	if err := c.Start(ctx); err != nil {
		return c, fmt.Errorf("install stack %s: %w", st.Name, err)
	}
	if nw.Mode == task.Allowlist && r.egress != nil {
		tun, err := r.installTunnel(ctx, c)
		if err != nil {
			return c, fmt.Errorf("install stack %s: %w", st.Name, err)
		}
		defer func() {
			if err := tun.Close(ctx); err != nil {
				r.cleanupError("close the install's tunnel", err)
			}
		}()
	}
	if err := r.runInstallScript(ctx, c, st, script.Path, rec, out); err != nil {
		return c, err
	}
	return c, r.checkInstall(ctx, c, st)
}

// createInstall creates an install's container: r.img with troupe's
// binary as init, the agents' network, labelled with the trial and the
// stack. As for the trial container, a create is not interrupted, and one
// whose id never came back is found by the trial's label.
func (r *run) createInstall(ctx context.Context, st *stack.Stack, nw task.Network) (runtime.Container, error) {
	spec := runtime.ContainerSpec{
		Image: r.img.Ref, Entrypoint: []string{runtime.BinaryPath, "init"}, User: "0:0", WorkDir: r.workdir, Binary: r.env.Binary,
		Labels:  map[string]string{runtime.LabelJob: r.env.JobID, runtime.LabelTrial: r.id, labelStack: st.Name},
		Network: runtime.NetworkNone, Pids: defaultPids,
	}
	if nw.Mode == task.Public {
		spec.Network = runtime.NetworkBridge
	}
	r.creating = true
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.env.Limits.scale(createTimeout))
	defer cancel()
	return r.env.Runtime.Create(cctx, spec)
}

// installTunnel opens a tunnel into an install's container that carries
// the allowlist proxy's port alone (the relay and the gateway are the
// agents'), and waits until it listens.
func (r *run) installTunnel(ctx context.Context, c runtime.Container) (*tunnel.Tunnel, error) {
	var d net.Dialer
	tun := tunnel.New(c, runtime.BinaryPath, []tunnel.Listen{{Addr: proxyListen, Name: "proxy"}},
		func(ctx context.Context, name string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", r.egress.Addr())
		}, tunnel.Options{Logger: r.log})
	if err := tun.Open(ctx); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(r.env.Limits.Ready))
	err := tun.WaitReady(wctx)
	cancel()
	if err != nil {
		if cerr := tun.Close(ctx); cerr != nil {
			r.cleanupError("close the install's tunnel", cerr)
		}
		return nil, err
	}
	return tun, nil
}

// runInstallScript runs the script in the install's container as the
// stack's install user, within its timeout, with its output in out (closed
// once it ended), and records its exit code. A script that cannot run,
// does not end in time or exits non-zero is an error quoting its last
// words.
func (r *run) runInstallScript(ctx context.Context, c runtime.Container, st *stack.Stack, script string, rec *trialdir.InstallRecord, out *sink) error {
	limit := r.installTimeout(st)
	p, err := c.Exec(ctx, runtime.ExecSpec{
		Cmd: []string{script}, Env: proxyEnv(r.agentNet()), User: cmp.Or(st.InstallUser, "0:0"), WorkDir: r.workdir, Stdout: out, Stderr: out,
	})
	if err != nil {
		return fmt.Errorf("install stack %s: run %s: %w", st.Name, script, err)
	}
	defer p.Close()
	started := time.Now()
	wctx, cancel := context.WithTimeout(ctx, limit)
	code, err := p.Wait(wctx)
	cancel()
	if err == nil && code == 0 {
		fmt.Fprintf(out, "troupe: installed in %s\n", time.Since(started).Round(time.Millisecond))
	}
	// The output is complete (or, on a timeout, what there is): its end
	// is quoted.
	if cerr := out.Close(); cerr != nil {
		r.cleanupError("write "+rec.Log, cerr)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("the install script of stack %s did not end within %s; its last words: %s", st.Name, limit, lastWords(out.Name(), 600))
	case err != nil:
		return fmt.Errorf("install stack %s: %w", st.Name, err)
	}
	rec.ExitCode = &code
	if code != 0 {
		return fmt.Errorf("the install script of stack %s exited %d; its last words: %s", st.Name, code, lastWords(out.Name(), 600))
	}
	return nil
}

// checkInstall refuses an install that changed what the verifier runs: it
// ran as root, before agents that may not be (a wrapper for /bin/sh could
// write any reward).
func (r *run) checkInstall(ctx context.Context, c runtime.Container, st *stack.Stack) error {
	changed, _, err := r.changedSystemFiles(ctx, c, true, func(ctx context.Context, name, arg string) ([]byte, error) {
		return r.execCall(ctx, c, name, arg)
	})
	if err != nil {
		return fmt.Errorf("install stack %s: check what it changed: %w", st.Name, err)
	}
	if len(changed) > 0 {
		if len(changed) > 10 {
			changed = append(changed[:10], fmt.Sprintf("and %d more", len(changed)-10))
		}
		return fmt.Errorf("the install script of stack %s changed what the verifier runs (%s): an install may add commands and libraries, not replace, remove or shadow the image's commands, preload a library or touch /tests (docs/stacks.md)", st.Name, strings.Join(changed, ", "))
	}
	return nil
}
