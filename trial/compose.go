package trial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trialdir"
)

// sidecarLister is a container that has a task's compose services running
// beside it (runtime/docker's): the trial lists them to sweep each before
// the verifier.
type sidecarLister interface {
	Sidecars(ctx context.Context) ([]runtime.Sidecar, error)
}

// sidecar is a running service and its processes before the agents
// started: what its sweep spares.
type sidecar struct {
	runtime.Sidecar
	baseline []byte // inside.Baseline, as troupe sweep --list gave it
}

// imageSpec is how an image is made for the runtime: pulled by name, else
// built from its folder.
func imageSpec(img task.Image) runtime.ImageSpec {
	return runtime.ImageSpec{Image: img.Pull, Build: build(img.Context, img.Dockerfile)}
}

// containerEnv is every process's environment in the trial container: the
// compose file's for main, then the task's [environment] env, which wins.
func containerEnv(t *task.Task) []string {
	env := map[string]string{}
	if t.Compose != nil {
		maps.Copy(env, t.Compose.Main.Env)
	}
	maps.Copy(env, t.Env)
	return envList(env)
}

// services resolves the compose file's sidecars' images, under the build
// timeout's context, and describes them for the runtime.
func (r *run) services(ctx context.Context) ([]runtime.ServiceSpec, []runtime.Dependency, error) {
	c := r.spec.Task.Compose
	if c == nil {
		return nil, nil, nil
	}
	var out []runtime.ServiceSpec
	for _, s := range c.Sidecars {
		img, err := r.env.Runtime.Image(ctx, imageSpec(s.ImageSource()))
		if err != nil {
			return nil, nil, err
		}
		cpus, mem, pids := r.limits()
		out = append(out, runtime.ServiceSpec{
			Name: s.Name, Image: img.Ref, Entrypoint: s.Entrypoint, Cmd: s.Command, Env: envList(s.Env),
			WorkDir: s.WorkDir, User: s.User, Healthcheck: s.Healthcheck, DependsOn: s.DependsOn,
			// Each service gets the task's limits, or its own where tighter:
			// an agent that reaches it must not take the machine through it.
			CPUs: tighter(cpus, s.CPUs), MemoryMB: tighter(mem, s.MemoryMB), Pids: tighter(pids, s.Pids),
			Mounts: serviceMounts(r.binds, s.Name),
		})
	}
	return out, c.Main.DependsOn, nil
}

// build is the image a folder builds, nil without one.
func build(dir, dockerfile string) *runtime.BuildSpec {
	if dir == "" {
		return nil
	}
	return &runtime.BuildSpec{Context: dir, Dockerfile: dockerfile}
}

// tighter is the smaller of two limits where zero (or less) is none.
func tighter[T int64 | float64](a, b T) T {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// listSidecars takes each running service's baseline, just before the
// agents start: the processes its sweep will spare. A service whose
// processes cannot be listed could not be swept: the trial stops here.
func (r *run) listSidecars(ctx context.Context) error {
	if r.spec.Task.Compose == nil || len(r.spec.Task.Compose.Sidecars) == 0 {
		return nil
	}
	sl, ok := r.container.(sidecarLister)
	if !ok {
		return fmt.Errorf("the %s runtime cannot list the task's services, so it could not sweep them before the verifier", r.env.Runtime.Name())
	}
	cctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(callTimeout))
	defer cancel()
	list, err := sl.Sidecars(cctx)
	if err != nil {
		return err
	}
	for _, sc := range list {
		if !sc.Running {
			continue // it ran to completion: nothing of it can run again
		}
		out, err := r.execTroupe(cctx, sc.Container, []string{runtime.BinaryPath, "sweep", "--list"}, nil)
		if err != nil {
			return fmt.Errorf("service %s: list its processes: %w", sc.Name, err)
		}
		r.sidecars = append(r.sidecars, sidecar{Sidecar: sc, baseline: out})
	}
	return nil
}

// sweepSidecars ends, in every service at once, each process that was not
// there when the agents started (troupe sweep --service), and records
// what each sweep did. An error means agent code may still run in a
// service: a sweep failed, or a process survived its KILL.
func (r *run) sweepSidecars(ctx context.Context) error {
	if len(r.sidecars) == 0 {
		return nil
	}
	grace := r.env.Limits.SweepGrace
	wctx, cancel := context.WithTimeout(ctx, grace+r.env.Limits.scale(sweepSlack))
	defer cancel()
	reps := make([]trialdir.ServiceSweep, len(r.sidecars))
	errs := make([]error, len(r.sidecars))
	var wg sync.WaitGroup
	for i, sc := range r.sidecars {
		wg.Go(func() {
			reps[i].Service = sc.Name
			out, err := r.execTroupe(wctx, sc.Container, []string{runtime.BinaryPath, "sweep", "--service", "--grace", grace.String()}, sc.baseline)
			if err == nil {
				err = json.Unmarshal(out, &reps[i].Report)
			}
			if err != nil {
				errs[i] = fmt.Errorf("sweep service %s: %w", sc.Name, err)
			}
		})
	}
	wg.Wait()
	for i, rep := range reps {
		if errs[i] != nil {
			continue
		}
		r.res.ServiceSweeps = append(r.res.ServiceSweeps, rep)
		for _, p := range rep.Signalled {
			r.log.Info("swept a process of a service", "service", rep.Service, "pid", p.PID, "uid", p.UID, "cmd", clip.Head(p.Cmd, 200), "killed", p.Kill)
		}
		if n := len(rep.Survivors); n > 0 {
			errs[i] = fmt.Errorf("service %s: %d processes survived KILL (first: pid %d, %s): the verifier was not run while agent code may still act", rep.Service, n, rep.Survivors[0].PID, clip.Head(rep.Survivors[0].Cmd, 120))
		}
	}
	return errors.Join(errs...)
}
