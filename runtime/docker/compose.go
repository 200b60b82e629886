package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/troupebench/troupe/runtime"
)

// Labels of a trial container with services: the services' network and
// containers, removed with it.
const (
	labelServiceNetwork = "troupe.service-network"
	labelServices       = "troupe.services"
	// LabelService names the compose service a sidecar runs.
	LabelService = "troupe.service"
)

// mainAlias is the trial container's name on the services' network.
const mainAlias = "main"

// healthPoll is how often a dependency's state is read.
const healthPoll = 200 * time.Millisecond

// services are a trial's sidecars while they start.
type services struct {
	netID, netName string
	ids            map[string]string // by service name
	order          []string
}

// startServices creates the services' network (internal: no way out) and
// starts each service on it, in order, once what it depends on holds;
// with ownNet (the trial's own bridge network) they reach the internet
// through it too. On error what was made is left in s for the caller to
// remove.
func (d *Docker) startServices(ctx context.Context, name string, labels map[string]string, spec runtime.ContainerSpec, ownNet string) (*services, error) {
	s := &services{netName: name + "-svc", ids: map[string]string{}}
	resp, err := d.cli.NetworkCreate(ctx, s.netName, trialBridge(labels, true, nil))
	if err != nil {
		return s, fmt.Errorf("docker: create the services' network: %w", err)
	}
	s.netID = resp.ID
	for _, svc := range spec.Services {
		if err := d.waitFor(ctx, s, svc.DependsOn); err != nil {
			return s, fmt.Errorf("docker: service %s: %w", svc.Name, err)
		}
		svcLabels := map[string]string{LabelService: svc.Name}
		for k, v := range labels {
			if k != labelNetwork {
				svcLabels[k] = v
			}
		}
		cfg := &container.Config{
			Image: svc.Image, Entrypoint: svc.Entrypoint, Cmd: svc.Cmd, Env: svc.Env, WorkingDir: svc.WorkDir, User: svc.User,
			Labels: svcLabels,
		}
		if h := svc.Healthcheck; h != nil {
			cfg.Healthcheck = &container.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod, Retries: h.Retries}
		}
		host := &container.HostConfig{NetworkMode: container.NetworkMode(s.netName), SecurityOpt: []string{"no-new-privileges:true"},
			Resources: container.Resources{NanoCPUs: int64(svc.CPUs * 1e9), Memory: svc.MemoryMB << 20}}
		if svc.Pids > 0 {
			pids := svc.Pids
			host.Resources.PidsLimit = &pids
		}
		if spec.Binary != nil {
			// troupe's binary, read-only, as in the trial container: the
			// sweep runs from it (troupe sweep --service).
			m, err := d.binaryMount(ctx, spec.Binary, svc.Image)
			if err != nil {
				return s, fmt.Errorf("docker: service %s: %w", svc.Name, err)
			}
			host.Mounts = append(host.Mounts, m)
		}
		host.Mounts = append(host.Mounts, binds(svc.Mounts)...)
		netConfig := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{s.netName: {Aliases: []string{svc.Name}}}}
		created, err := d.cli.ContainerCreate(ctx, cfg, host, netConfig, nil, name+"-"+sanitize(svc.Name))
		if err != nil {
			return s, fmt.Errorf("docker: create service %s from %s: %w", svc.Name, svc.Image, err)
		}
		s.ids[svc.Name] = created.ID
		s.order = append(s.order, svc.Name)
		if ownNet != "" {
			if err := d.cli.NetworkConnect(ctx, ownNet, created.ID, nil); err != nil {
				return s, fmt.Errorf("docker: service %s: connect it to the internet: %w", svc.Name, err)
			}
		}
		if err := d.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
			return s, fmt.Errorf("docker: start service %s: %w", svc.Name, err)
		}
	}
	if err := d.waitFor(ctx, s, spec.DependsOn); err != nil {
		return s, fmt.Errorf("docker: the trial container's dependencies: %w", err)
	}
	return s, nil
}

// waitFor waits until each dependency's condition holds: started (it
// was), healthy (its healthcheck passed), or completed with exit 0.
func (d *Docker) waitFor(ctx context.Context, s *services, deps []runtime.Dependency) error {
	for _, dep := range deps {
		id, ok := s.ids[dep.Service]
		if !ok {
			return fmt.Errorf("depends on %s, which has not started (services start in dependency order)", dep.Service)
		}
		if dep.Condition == runtime.DependStarted || dep.Condition == "" {
			continue
		}
		if err := d.waitCondition(ctx, dep, id); err != nil {
			return err
		}
	}
	return nil
}

func (d *Docker) waitCondition(ctx context.Context, dep runtime.Dependency, id string) error {
	tick := time.NewTicker(healthPoll)
	defer tick.Stop()
	for {
		info, err := d.cli.ContainerInspect(ctx, id)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", dep.Service, err)
		}
		st := info.State
		switch dep.Condition {
		case runtime.DependHealthy:
			if st.Health == nil {
				return fmt.Errorf("%s has no healthcheck, so it cannot become healthy (depends_on condition %s)", dep.Service, dep.Condition)
			}
			switch st.Health.Status {
			case container.Healthy:
				return nil
			case container.Unhealthy:
				return fmt.Errorf("%s is unhealthy: %s", dep.Service, lastProbe(st.Health))
			}
			if !st.Running {
				return fmt.Errorf("%s exited (%d) before it was healthy: %s", dep.Service, st.ExitCode, d.tail(ctx, id))
			}
		case runtime.DependCompleted:
			if !st.Running && st.Status != container.StateCreated {
				if st.ExitCode != 0 {
					return fmt.Errorf("%s exited %d: %s", dep.Service, st.ExitCode, d.tail(ctx, id))
				}
				return nil
			}
		default:
			return fmt.Errorf("depends_on condition %q is not %s, %s or %s", dep.Condition, runtime.DependStarted, runtime.DependHealthy, runtime.DependCompleted)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to be %s: %w", dep.Service, strings.TrimPrefix(dep.Condition, "service_"), context.Cause(ctx))
		}
	}
}

func lastProbe(h *container.Health) string {
	if len(h.Log) == 0 {
		return "no probe ran"
	}
	l := h.Log[len(h.Log)-1]
	return fmt.Sprintf("its last probe exited %d: %s", l.ExitCode, strings.TrimSpace(clipTail(l.Output, 300)))
}

// tail is the end of a service's output, for errors.
func (d *Docker) tail(ctx context.Context, id string) string {
	rc, err := d.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return "(its output could not be read: " + err.Error() + ")"
	}
	defer rc.Close()
	var out strings.Builder
	stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 64<<10))
	if s := strings.TrimSpace(out.String()); s != "" {
		return clipTail(s, 600)
	}
	return "(no output)"
}

func clipTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, s)
}

// removeServices removes a trial's services, then their network; what is
// already gone is fine.
func (d *Docker) removeServices(ctx context.Context, ids []string, netID string) error {
	var errs []error
	for _, id := range ids {
		if id == "" {
			continue
		}
		if err := d.removeContainer(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	if netID != "" {
		errs = append(errs, d.removeNetwork(ctx, netID))
	}
	return errors.Join(errs...)
}

// Sidecars lists the services started with the trial container, in the
// order they started, and whether each still runs: a trial sweeps each
// before its verifier.
func (c *Container) Sidecars(ctx context.Context) ([]runtime.Sidecar, error) {
	info, err := c.d.cli.ContainerInspect(ctx, c.id)
	if err != nil {
		return nil, fmt.Errorf("docker: list the services of %s: %w", short(c.id), err)
	}
	var out []runtime.Sidecar
	for sid := range strings.SplitSeq(info.Config.Labels[labelServices], ",") {
		if sid == "" {
			continue
		}
		svc, err := c.d.cli.ContainerInspect(ctx, sid)
		if err != nil {
			return out, fmt.Errorf("docker: service container %s: %w", short(sid), err)
		}
		out = append(out, runtime.Sidecar{Name: svc.Config.Labels[LabelService], ID: sid, Running: svc.State != nil && svc.State.Running,
			Container: c.d.Container(sid)})
	}
	return out, nil
}

// join puts the trial container on the services' network, as "main", and
// labels it with them, so that removing it removes them; it returns the
// endpoint to create the container with.
func (s *services) join(labels map[string]string, host *container.HostConfig) *network.NetworkingConfig {
	labels[labelServiceNetwork] = s.netID
	labels[labelServices] = strings.Join(s.list(), ",")
	// The services' network first: names resolve there before the job's
	// network, where trials cannot reach each other.
	host.NetworkMode = container.NetworkMode(s.netName)
	return &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{s.netName: {Aliases: []string{mainAlias}}}}
}

// list is the services' container ids, in the order they started.
func (s *services) list() []string {
	var ids []string
	for _, name := range s.order {
		ids = append(ids, s.ids[name])
	}
	return ids
}
