package trial

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"strings"

	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/runtime/tunnel"
)

// Steps 2 and 3 (docs/run.md): the container, what it is given, the tunnel,
// and troupe's own calls inside it.

// createContainer resolves the image and starts the container with the
// binary, the agents' secrets and the shared working folder in place.
func (r *run) createContainer(ctx context.Context) (ErrorKind, error) {
	rt, task := r.env.Runtime, r.spec.Task
	binds, err := r.env.HostPaths.Binds(task)
	if err != nil {
		return ErrContainer, err
	}
	r.binds = binds
	bctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(task.BuildTimeout))
	img, err := rt.Image(bctx, imageSpec(task.MainImage()))
	var services []runtime.ServiceSpec
	var dependsOn []runtime.Dependency
	if err == nil {
		services, dependsOn, err = r.services(bctx)
	}
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return ErrImageTimeout, fmt.Errorf("the image was not ready within %s: %w", r.env.Limits.scale(task.BuildTimeout), err)
		}
		return ErrImageBuild, err
	}
	r.img = img
	r.workdir = cmp.Or(task.Workdir, img.WorkDir, defaultWorkdir)
	// The stacks' install scripts first, each in a container of its own:
	// the trial's starts from the image they made (install.go).
	if kind, err := r.install(ctx); err != nil {
		return kind, err
	}
	spec := runtime.ContainerSpec{
		Image: r.img.Ref, Entrypoint: initCommand(r.img), User: "0:0", WorkDir: r.workdir, Binary: r.env.Binary,
		Labels:   map[string]string{runtime.LabelJob: r.env.JobID, runtime.LabelTrial: r.id},
		Env:      containerEnv(task),
		Network:  r.containerNetwork(),
		Services: services, DependsOn: dependsOn,
		Mounts:    r.mainMounts(),
		StorageMB: r.storageLimit(ctx, r.img.Ref),
	}
	spec.CPUs, spec.MemoryMB, spec.Pids = r.limits()
	// A create is not interrupted: cancelled in flight, the engine may still
	// make the container after the client stopped listening, leaving one
	// nobody knows the id of. It is quick; the cancellation is seen after.
	// Services are waited for, and that may be cut short: what Create
	// made is removed by it, or found by the trial's label (removeByLabel).
	r.creating = true
	cbase := context.WithoutCancel(ctx)
	if len(services) > 0 {
		cbase = ctx
	}
	cctx, cancelCreate := context.WithTimeout(cbase, r.env.Limits.scale(createTimeout))
	c, err := rt.Create(cctx, spec)
	cancelCreate()
	if err != nil {
		return ErrContainer, err
	}
	r.container = c
	if err := ctx.Err(); err != nil {
		return ErrCancelled, err
	}
	r.log.Info("container", "id", c.ID(), "image", r.img.Ref, "workdir", r.workdir, "network", spec.Network, "agents", r.agentNet().Mode, "verifier", r.verifierNet().Mode)
	if spec.Network == runtime.NetworkBridge && !r.agentsOnline() {
		// The internet is the verifier's only: the agents start offline.
		if err := c.SetOnline(ctx, false); err != nil {
			return ErrContainer, err
		}
	}
	if err := c.Start(ctx); err != nil {
		return ErrContainer, err
	}
	r.log.Info("container started")
	return "", nil
}

// prepare unpacks the agents' files in the container and, for isolated
// agents, makes the working folder writable by all of them. It is a call
// through the tunnel, which runs as root: no exec, no copy through the
// engine (each costs about 50 ms).
func (r *run) prepare(ctx context.Context) error {
	var opts inside.Prepare
	if r.isolated() {
		opts.Share, opts.GID = r.workdir, agentGID
	}
	opts.Copies = r.skillsCopies()
	arg, _ := json.Marshal(opts)
	inFiles := r.containerFiles()
	uploads, err := r.stackFiles()
	if err != nil {
		return fmt.Errorf("prepare the container: %w", err)
	}
	inFiles = append(inFiles, uploads...)
	if r.spec.Oracle && len(r.spec.Task.Steps) == 0 { // a step's comes before it (steps.go)
		sol, err := r.solutionFiles()
		if err != nil {
			return fmt.Errorf("prepare the container: %w", err)
		}
		inFiles = append(inFiles, sol...)
	}
	var files bytes.Buffer
	if err := runtime.WriteTar(&files, inFiles); err != nil {
		return fmt.Errorf("prepare the container: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(callTimeout))
	defer cancel()
	out, err := r.tun.Call(cctx, "prepare", string(arg), files.Bytes())
	if err != nil {
		return fmt.Errorf("prepare the container: %w", err)
	}
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		r.log.Warn("prepare", "note", strings.TrimSpace(line))
	}
	if len(opts.Copies) > 0 {
		r.log.Info("task skills copied", "from", r.spec.Task.SkillsDir, "agents", len(opts.Copies))
	}
	r.log.Info("container prepared", "workdir", r.workdir, "shared", r.isolated())
	return nil
}

// skillsCopies put the task's skills folder (a folder of the container)
// where each agent whose stack reads skills reads them, as the agent's
// own.
func (r *run) skillsCopies() []inside.Copy {
	if r.spec.Oracle || r.spec.Task.SkillsDir == "" {
		return nil
	}
	var out []inside.Copy
	for _, ar := range r.agents {
		if dst := ar.stack.SkillsIn(contract.Home(ar.ID)); dst != "" {
			out = append(out, inside.Copy{Src: r.spec.Task.SkillsDir, Dst: dst, UID: ar.uid, GID: ar.uid})
		}
	}
	return out
}

// containerFiles are what prepare unpacks: each agent's key, token and
// prompt readable by it alone, its home, and the log folders. troupe's
// binary comes with the container (ContainerSpec.Binary).
func (r *run) containerFiles() []runtime.File {
	gid := 0
	if r.isolated() {
		gid = agentGID
	}
	files := []runtime.File{
		{Path: "/run/troupe", Mode: fs.ModeDir | 0o755},
		{Path: contract.SecretsDir, Mode: fs.ModeDir | 0o755},
		{Path: contract.HomesDir, Mode: fs.ModeDir | 0o755},
		{Path: "/logs", Mode: fs.ModeDir | 0o755},
		{Path: verifierLogs, Mode: fs.ModeDir | 0o755},
		{Path: artifactsDir, Mode: fs.ModeDir | fs.ModeSetgid | 0o775, GID: gid},
	}
	if r.spec.Oracle {
		return files // no keys, tokens or prompts
	}
	for _, ar := range r.agents {
		dir := contract.Dir(ar.ID)
		files = append(files,
			runtime.File{Path: dir, Mode: fs.ModeDir | 0o500, UID: ar.uid, GID: ar.uid},
			runtime.File{Path: path.Join(dir, contract.KeyFile), Data: []byte(ar.sk.Reveal() + "\n"), Mode: 0o400, UID: ar.uid, GID: ar.uid},
			runtime.File{Path: path.Join(dir, contract.TokenFile), Data: []byte(r.gw.Token(ar.ID).Reveal() + "\n"), Mode: 0o400, UID: ar.uid, GID: ar.uid},
			runtime.File{Path: path.Join(dir, contract.PromptFile), Data: ar.prompt, Mode: 0o400, UID: ar.uid, GID: ar.uid},
			runtime.File{Path: contract.Home(ar.ID), Mode: fs.ModeDir | 0o700, UID: ar.uid, GID: ar.uid},
		)
	}
	return files
}

// stackFiles are the files of the stacks the agents run, each stack's
// once, checked against their digests again (a file may have changed since
// the job started).
func (r *run) stackFiles() ([]runtime.File, error) {
	var out []runtime.File
	seen := map[string]bool{}
	for _, ar := range r.agents {
		if ar.stack == nil || seen[ar.stack.Name] {
			continue
		}
		seen[ar.stack.Name] = true
		files, err := ar.stack.Verify()
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

// openTunnel connects the container's relay and gateway ports to the job's
// (not for the oracle, which uses neither), and the egress proxy's.
func (r *run) openTunnel(ctx context.Context) error {
	var relayAddr, llmAddr string
	var listens []tunnel.Listen
	if !r.spec.Oracle {
		var err error
		if relayAddr, err = hostPort(r.env.Relay.URL()); err != nil {
			return err
		}
		if llmAddr, err = hostPort(r.env.Gateway.URL()); err != nil {
			return err
		}
		listens = []tunnel.Listen{{Addr: relayListen, Name: "relay"}, {Addr: llmListen, Name: "llm"}}
	}
	var d net.Dialer
	dial := func(ctx context.Context, name string) (net.Conn, error) {
		switch {
		case name == "proxy" && r.egress != nil:
			return d.DialContext(ctx, "tcp", r.egress.Addr())
		case r.servicesOff.Load():
			return nil, fmt.Errorf("%s is closed: the agents' work has ended", name)
		case name == "relay" && relayAddr != "":
			return d.DialContext(ctx, "tcp", relayAddr)
		case name == "llm" && llmAddr != "":
			return d.DialContext(ctx, "tcp", llmAddr)
		}
		return nil, fmt.Errorf("no target %q", name)
	}
	if r.egress != nil {
		listens = append(listens, tunnel.Listen{Addr: proxyListen, Name: "proxy"})
	}
	tun := tunnel.New(r.container, runtime.BinaryPath, listens, dial, tunnel.Options{Logger: r.log})
	if err := tun.Open(ctx); err != nil {
		return err
	}
	r.tun = tun
	rctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(r.env.Limits.Ready))
	defer cancel()
	if err := r.tun.WaitReady(rctx); err != nil {
		return err
	}
	r.log.Info("tunnel ready")
	return nil
}

func hostPort(u string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("address %s: %w", u, err)
	}
	return parsed.Host, nil
}

// callInside runs one of troupe's calls inside the container (cmd/troupe's
// tunnelCalls): through the tunnel while it runs, else as `troupe call` in an
// exec of its own — an agent running as root may have killed the tunnel.
func (r *run) callInside(ctx context.Context, name, arg string, in []byte) ([]byte, error) {
	if r.tun != nil {
		select {
		case <-r.tun.Done():
		default:
			return r.tun.Call(ctx, name, arg, in)
		}
	}
	return r.execCallIn(ctx, r.container, name, arg, in)
}

// execCall runs one of troupe's calls in container c, in an exec of its
// own (an install's container has no tunnel).
func (r *run) execCall(ctx context.Context, c runtime.Container, name, arg string) ([]byte, error) {
	return r.execCallIn(ctx, c, name, arg, nil)
}

func (r *run) execCallIn(ctx context.Context, c runtime.Container, name, arg string, in []byte) ([]byte, error) {
	return r.execTroupe(ctx, c, []string{runtime.BinaryPath, "call", name, arg}, in)
}

// execTroupe runs troupe's binary as root in a container of the trial
// (the trial's, a service's or an install's) with in on its standard
// input, and returns its standard output.
func (r *run) execTroupe(ctx context.Context, c runtime.Container, cmd []string, in []byte) ([]byte, error) {
	var out, errOut bytes.Buffer
	p, err := c.Exec(ctx, runtime.ExecSpec{
		Cmd: cmd, User: "0:0", Stdin: true, Stdout: &out, Stderr: &errOut,
	})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	_, werr := p.Stdin().Write(in)
	if cerr := p.Stdin().Close(); werr == nil {
		werr = cerr
	}
	code, err := p.Wait(ctx)
	switch {
	case err != nil:
		return nil, err
	case code != 0:
		return nil, fmt.Errorf("troupe %s: exit %d: %s", strings.Join(cmd[1:], " "), code, clip.Head(strings.TrimSpace(errOut.String()), 600))
	case werr != nil:
		return nil, fmt.Errorf("troupe %s: send its input: %w", strings.Join(cmd[1:], " "), werr)
	}
	return out.Bytes(), nil
}
