package trial

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"time"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/tunnel"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
)

// ErrInstall is a stack's install script that failed: it exited non-zero,
// did not end in time, or could not be run.
const ErrInstall ErrorKind = "InstallError"

// Labels on the image an install makes, beside the runtime's own.
const (
	labelStack       = "troupe.stack"
	labelStackDigest = "troupe.stack-digest"
)

// imageCommitter is what caching installs needs of a runtime beyond
// Runtime; runtime/docker implements it.
type imageCommitter interface {
	// CommitOnce returns the image made for spec (one per base image ID
	// and key) or, when there is none yet, calls run, which makes a
	// container from spec.Base and returns its id, and commits that
	// container: made says so. One call per image runs at a time. run's
	// container is the caller's to remove.
	CommitOnce(ctx context.Context, spec runtime.CommitSpec, run func(context.Context) (string, error)) (img runtime.Image, made bool, err error)
}

// InstallRecord is result.json's record of a stack's install script.
type InstallRecord struct {
	Stack       string `json:"stack"`
	StackDigest string `json:"stack_digest"`
	// Image is what the install made, or an earlier trial's install of the
	// same stack on the same image: the trial container starts from it.
	Image string `json:"image,omitempty"`
	// Cached: an earlier install's image was used; the script did not run.
	Cached bool `json:"cached"`
	// Network is what the script had (the agents' network), when it ran.
	Network *task.Network `json:"network,omitempty"`
	// ExitCode is the script's exit status, when it ended.
	ExitCode   *int    `json:"exit_code,omitempty"`
	TimeoutSec float64 `json:"timeout_sec"`
	// DurationSec is how long it took to have the image: running the
	// script and committing its container, or finding the image made.
	DurationSec float64 `json:"duration_sec"`
	// Log is the script's output in the trial folder, when it ran.
	Log string `json:"log,omitempty"`
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
	c, ok := r.env.Runtime.(imageCommitter)
	if !ok {
		return ErrInstall, fmt.Errorf("stack %s has an install script, but the %s runtime cannot keep what it installs as an image: run it with --runtime docker, or use an image with the stack installed (docs/stacks.md)", stacks[0].Name, r.env.Runtime.Name())
	}
	for _, st := range stacks {
		rec := InstallRecord{Stack: st.Name, StackDigest: st.Digest(), TimeoutSec: r.installTimeout(st).Seconds()}
		start := time.Now()
		var id string
		img, made, err := c.CommitOnce(ctx, runtime.CommitSpec{Base: r.img.Ref, Key: rec.StackDigest, Labels: map[string]string{
			runtime.LabelJob: r.env.JobID, runtime.LabelTrial: r.id, labelStack: st.Name, labelStackDigest: rec.StackDigest,
		}}, func(ctx context.Context) (string, error) {
			var err error
			id, err = r.runInstall(ctx, st, &rec)
			return id, err
		})
		if id != "" {
			if rerr := r.env.Runtime.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: id}); rerr != nil {
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
func (r *run) runInstall(ctx context.Context, st *stack.Stack, rec *InstallRecord) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	script, err := st.InstallScript()
	if err != nil {
		return "", err
	}
	files, err := st.Verify()
	if err != nil {
		return "", err
	}
	rt, nw := r.env.Runtime, r.agentNet()
	rec.Network = &nw
	rec.Log = path.Join("agents", "install-"+st.Name+".log")
	out, err := r.openSink(rec.Log, r.env.bounds().AgentOutput)
	if err != nil {
		return "", err
	}
	spec := runtime.ContainerSpec{
		Image: r.img.Ref, Entrypoint: []string{runtime.BinaryPath, "init"}, User: "0:0", WorkDir: r.workdir, Binary: r.env.Binary,
		Labels:  map[string]string{runtime.LabelJob: r.env.JobID, runtime.LabelTrial: r.id, labelStack: st.Name},
		Network: runtime.NetworkNone, Pids: defaultPids,
	}
	if nw.Mode == task.Public {
		spec.Network = runtime.NetworkBridge
	}
	// As for the trial container: a create is not interrupted, and one
	// whose id never came back is found by the trial's label.
	r.creating = true
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.env.Limits.scale(createTimeout))
	id, err := rt.Create(cctx, spec)
	cancel()
	if err != nil {
		return "", fmt.Errorf("install stack %s: %w", st.Name, err)
	}
	fmt.Fprintf(out, "troupe: installing stack %s (%s) in a container of %s, network %s\n", st.Name, rec.StackDigest, r.img.Ref, nw.Mode)
	if err := rt.CopyIn(ctx, id, append(files, script)); err != nil {
		return id, fmt.Errorf("install stack %s: %w", st.Name, err)
	}
	if err := rt.Start(ctx, id); err != nil {
		return id, fmt.Errorf("install stack %s: %w", st.Name, err)
	}
	if nw.Mode == task.Allowlist && r.egress != nil {
		// The proxy's port is all the tunnel carries: the relay and the
		// gateway are the agents'.
		var d net.Dialer
		tun, err := tunnel.Open(ctx, rt, id, runtime.BinaryPath, []tunnel.Listen{{Addr: proxyListen, Name: "proxy"}},
			func(ctx context.Context, name string) (net.Conn, error) {
				return d.DialContext(ctx, "tcp", r.egress.Addr())
			}, tunnel.Options{Logger: r.log})
		if err != nil {
			return id, fmt.Errorf("install stack %s: %w", st.Name, err)
		}
		defer func() {
			if err := tun.Close(); err != nil {
				r.cleanupError("close the install's tunnel", err)
			}
		}()
		wctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(r.env.Limits.Ready))
		err = tun.WaitReady(wctx)
		cancel()
		if err != nil {
			return id, fmt.Errorf("install stack %s: %w", st.Name, err)
		}
	}
	limit := r.installTimeout(st)
	p, err := rt.Exec(ctx, id, runtime.ExecSpec{
		Cmd: []string{script.Path}, Env: proxyEnv(nw), User: cmp.Or(st.InstallUser, "0:0"), WorkDir: r.workdir, Stdout: out, Stderr: out,
	})
	if err != nil {
		return id, fmt.Errorf("install stack %s: run %s: %w", st.Name, script.Path, err)
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
		return id, fmt.Errorf("the install script of stack %s did not end within %s; its last words: %s", st.Name, limit, lastWords(out.Name(), 600))
	case err != nil:
		return id, fmt.Errorf("install stack %s: %w", st.Name, err)
	}
	rec.ExitCode = &code
	if code != 0 {
		return id, fmt.Errorf("the install script of stack %s exited %d; its last words: %s", st.Name, code, lastWords(out.Name(), 600))
	}
	// It ran as root, before agents that may not be: it must not change
	// what the verifier runs (a wrapper for /bin/sh could write any reward).
	changed, _, err := r.changedSystemFiles(ctx, id, true, func(ctx context.Context, name, arg string) ([]byte, error) {
		return r.execCall(ctx, id, name, arg)
	})
	if err != nil {
		return id, fmt.Errorf("install stack %s: check what it changed: %w", st.Name, err)
	}
	if len(changed) > 0 {
		if len(changed) > 10 {
			changed = append(changed[:10], fmt.Sprintf("and %d more", len(changed)-10))
		}
		return id, fmt.Errorf("the install script of stack %s changed what the verifier runs (%s): an install may add commands and libraries, not replace, remove or shadow the image's commands, preload a library or touch /tests (docs/stacks.md)", st.Name, strings.Join(changed, ", "))
	}
	return id, nil
}
