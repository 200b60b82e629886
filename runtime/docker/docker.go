// Package docker runs trial containers on a Docker Engine through its API
// (negotiating down to the engine's version, 1.41 on Docker 20.10): Docker
// is the backend (images, the job's network, the reaper's list and
// remove, troupe doctor's checks) and Container the handle of one of its
// containers, a runtime.Container.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/troupebench/troupe/runtime"
)

// labelNetwork names the network a container was given, so Remove removes
// it after the container.
const labelNetwork = "troupe.network"

// KindNetwork is the kind of a network troupe made (a job's, or a trial's
// sidecars').
const KindNetwork = "network"

// RemoveTimeout bounds one removal.
const RemoveTimeout = 30 * time.Second

// Docker is the Docker backend. Create it with New, connect it with Open;
// Close releases it.
type Docker struct {
	// BinaryVolumePrefix names the volumes holding troupe's binary: the
	// prefix, then the binary's digest. Tests give theirs a prefix of their
	// own so that they can remove them.
	BinaryVolumePrefix string
	// Rebuild, when true, builds each task environment again, the engine's
	// layer cache off, the first time this process resolves it, even when
	// an image built from the same inputs exists; later resolutions reuse
	// that build. False reuses an image built from the same inputs. Set it
	// before the first Image.
	Rebuild bool

	cli     *client.Client
	owner   runtime.Owner
	version string
	logger  *slog.Logger

	buildMu sync.Mutex
	builds  map[string]*sync.Mutex // one build per environment digest at a time
	rebuilt map[string]bool        // cache keys built again under Rebuild; guarded by buildMu
	// onBuild, when set, is called before each build: a seam for tests.
	onBuild func(tag string, noCache bool)
	bins    binaryVolumes
	jobNets jobNetworks
	fence   hostFence
	storage storageProbe
}

var _ runtime.Cleaner = (*Docker)(nil)

// Name is "docker".
func (d *Docker) Name() string { return "docker" }

// New makes a backend for the Docker Engine named by the environment
// (DOCKER_HOST, or the local socket); Open connects it. version is
// troupe's, for the troupe.version label.
func New(version string, logger *slog.Logger) *Docker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Docker{version: version, logger: logger, builds: map[string]*sync.Mutex{},
		bins: binaryVolumes{locks: map[string]*sync.Mutex{}}, BinaryVolumePrefix: DefaultBinaryVolumePrefix}
}

// Open connects to the engine and checks that it answers.
func (d *Docker) Open(ctx context.Context) error {
	owner, err := runtime.Self()
	if err != nil {
		return fmt.Errorf("docker: who owns what troupe creates: %w", err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pingCtx); err != nil {
		cli.Close()
		return fmt.Errorf("docker: the engine at %s does not answer (%v); is the Docker daemon running and is DOCKER_HOST right? troupe doctor checks the setup", cli.DaemonHost(), err)
	}
	d.cli, d.owner = cli, owner
	return nil
}

// Close removes the job networks this process made and releases the
// connection to the engine.
func (d *Docker) Close(ctx context.Context) error {
	if d.cli == nil {
		return nil
	}
	err := d.endJobs(context.WithoutCancel(ctx))
	return errors.Join(err, d.cli.Close())
}

// Isolation: a container without network has no interface but loopback
// (network none, or disconnected from its network).
func (d *Docker) Isolation() runtime.Isolation {
	return runtime.Isolation{Runtime: d.Name(), Enforced: "no network interface but loopback (Docker network none, or disconnected)"}
}

// Client is the underlying Engine API client, for checks beyond a trial's
// needs (troupe doctor).
func (d *Docker) Client() *client.Client { return d.cli }

// Owner is the owner this backend labels resources with.
func (d *Docker) Owner() runtime.Owner { return d.owner }

// labels returns troupe's labels for a new resource.
func (d *Docker) labels(extra map[string]string) map[string]string {
	out := map[string]string{runtime.LabelOwner: d.owner.String(), runtime.LabelVersion: d.version}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// nameFor makes a readable, unique resource name from a trial label.
func nameFor(labels map[string]string) string {
	base := labels[runtime.LabelTrial]
	base = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, strings.ToLower(base))
	if len(base) > 40 {
		base = base[:40]
	}
	if base == "" {
		base = "x"
	}
	return "troupe-" + base + "-" + randomSuffix()
}

// Create creates a container, not started, with no network unless the
// spec asks for one: then it joins its job's network. Services are
// started first, on an internal network the container joins as "main".
// A failed or cancelled Create removes what it made.
func (d *Docker) Create(ctx context.Context, spec runtime.ContainerSpec) (runtime.Container, error) {
	labels := d.labels(spec.Labels)
	name := nameFor(labels)
	host, err := d.hostConfig(ctx, spec)
	if err != nil {
		return nil, err
	}
	netConfig, err := d.joinNetwork(ctx, spec, labels, host)
	if err != nil {
		return nil, err
	}
	// undo removes what Create made when it fails.
	var svcs *services
	undo := func(err error) error {
		// A cancelled Create still removes what it made.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
		defer cancel()
		if svcs != nil {
			err = errors.Join(err, d.removeServices(ctx, svcs.list(), svcs.netID))
		}
		if cerrdefs.IsNotFound(err) && labels[labelJobNetwork] != "" {
			d.forget(labels[runtime.LabelJob], labels[labelNetwork])
		}
		return err
	}
	if len(spec.Services) > 0 {
		if svcs, err = d.startServices(ctx, name, labels, spec, labels[labelJobNetwork]); err != nil {
			return nil, undo(err)
		}
		netConfig = svcs.join(labels, host)
	}
	cfg := &container.Config{
		Image:      spec.Image,
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Cmd,
		Env:        spec.Env,
		WorkingDir: spec.WorkDir,
		User:       spec.User,
		Labels:     labels,
		StopSignal: "SIGTERM",
	}
	resp, err := d.cli.ContainerCreate(ctx, cfg, host, netConfig, nil, name)
	if err != nil {
		return nil, undo(fmt.Errorf("docker: create container from %s: %w", spec.Image, err))
	}
	if svcs != nil && labels[labelJobNetwork] != "" {
		// The engine (API 1.41) attaches one network at create.
		if err := d.cli.NetworkConnect(ctx, labels[labelNetwork], resp.ID, nil); err != nil {
			err = fmt.Errorf("docker: connect the trial container to the internet: %w", err)
			return nil, undo(errors.Join(err, d.removeContainer(ctx, resp.ID)))
		}
	}
	return d.Container(resp.ID), nil
}

// hostConfig is how the engine runs a trial container: its limits, no
// privileges gained, troupe's binary mounted read-only, no network yet.
func (d *Docker) hostConfig(ctx context.Context, spec runtime.ContainerSpec) (*container.HostConfig, error) {
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(runtime.NetworkNone),
		// A process cannot gain privileges (setuid) that it was not started
		// with: agents stay the users they were launched as.
		SecurityOpt: []string{"no-new-privileges:true"},
		Resources: container.Resources{
			NanoCPUs: int64(spec.CPUs * 1e9),
			Memory:   spec.MemoryMB << 20,
		},
	}
	if spec.Pids > 0 {
		pids := spec.Pids
		host.Resources.PidsLimit = &pids
	}
	if spec.StorageMB > 0 {
		host.StorageOpt = map[string]string{"size": fmt.Sprintf("%dM", spec.StorageMB)}
	}
	if spec.Binary != nil {
		m, err := d.binaryMount(ctx, spec.Binary, spec.Image)
		if err != nil {
			return nil, err
		}
		host.Mounts = append(host.Mounts, m)
	}
	host.Mounts = append(host.Mounts, binds(spec.Mounts)...)
	return host, nil
}

// binds are host paths bound as the spec says: the path itself, never a
// folder the engine would create for a missing one.
func binds(mounts []runtime.Mount) []mount.Mount {
	var out []mount.Mount
	for _, m := range mounts {
		out = append(out, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	return out
}

// joinNetwork gives the container its job's internet network when the
// spec asks for NetworkBridge (the host fenced first, as for any network
// of trials), labelling it with the network, and returns the endpoint to
// create it with; nil is none.
func (d *Docker) joinNetwork(ctx context.Context, spec runtime.ContainerSpec, labels map[string]string, host *container.HostConfig) (*network.NetworkingConfig, error) {
	if spec.Network == runtime.NetworkBridge || len(spec.Services) > 0 {
		// A bridge's gateway is an address of the host: fenced first.
		if err := d.fenceHost(ctx, spec.Image, spec.Binary); err != nil {
			return nil, err
		}
	}
	switch spec.Network {
	case "", runtime.NetworkNone:
		return nil, nil
	case runtime.NetworkBridge:
		n, err := d.jobNetwork(ctx, labels[runtime.LabelJob])
		if err != nil {
			return nil, err
		}
		labels[labelNetwork], labels[labelJobNetwork] = n.id, n.name
		host.NetworkMode = container.NetworkMode(n.name)
		return &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{n.name: {}}}, nil
	}
	return nil, fmt.Errorf("docker: network mode %q is not %s or %s", spec.Network, runtime.NetworkNone, runtime.NetworkBridge)
}

func short(id string) string { return id[:min(12, len(id))] }

// Remove removes a container (by force, with its anonymous volumes, then its
// own network) or a network. It is bounded by RemoveTimeout and runs even if
// ctx was cancelled; a resource already gone is not an error.
func (d *Docker) Remove(ctx context.Context, r runtime.Resource) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
	defer cancel()
	switch r.Kind {
	case runtime.KindContainer:
		labels := r.Labels
		if labels[labelNetwork] == "" && labels[labelServices] == "" {
			if info, err := d.cli.ContainerInspect(ctx, r.ID); err == nil {
				labels = info.Config.Labels
			}
		}
		if err := d.removeContainer(ctx, r.ID); err != nil {
			return err
		}
		var errs []error
		if ids := labels[labelServices]; ids != "" || labels[labelServiceNetwork] != "" {
			errs = append(errs, d.removeServices(ctx, strings.Split(ids, ","), labels[labelServiceNetwork]))
		}
		if netID := labels[labelNetwork]; netID != "" && labels[labelJobNetwork] == "" {
			// A container of an older troupe, with a network of its own.
			errs = append(errs, d.removeNetwork(ctx, netID))
		}
		return errors.Join(errs...)
	case KindNetwork:
		return d.removeNetwork(ctx, r.ID)
	}
	return fmt.Errorf("docker: cannot remove a %s", r.Kind)
}

// removeContainer removes a container by force and returns once it is
// gone. Two troupe processes may remove the same one at once (a run's
// reaper and troupe clean): the engine refuses the second while the first
// removal runs, and that one then waits for the container to go instead of
// failing.
func (d *Docker) removeContainer(ctx context.Context, id string) error {
	err := d.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	if !cerrdefs.IsConflict(err) || !strings.Contains(err.Error(), "already in progress") {
		return fmt.Errorf("docker: remove container %s: %w", short(id), err)
	}
	gone, errs := d.cli.ContainerWait(ctx, id, container.WaitConditionRemoved)
	select {
	case <-gone:
		return nil
	case werr := <-errs:
		if cerrdefs.IsNotFound(werr) {
			return nil
		}
		return fmt.Errorf("docker: remove container %s: another removal is under way, and waiting for it: %w", short(id), werr)
	}
}

func (d *Docker) removeNetwork(ctx context.Context, id string) error {
	if err := d.cli.NetworkRemove(ctx, id); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: remove network %s: %w", short(id), err)
	}
	return nil
}

// List lists troupe's containers and networks whose labels match.
func (d *Docker) List(ctx context.Context, labels map[string]string) ([]runtime.Resource, error) {
	args := filters.NewArgs()
	for k, v := range labels {
		if v == "" {
			args.Add("label", k)
		} else {
			args.Add("label", k+"="+v)
		}
	}
	if _, ok := labels[runtime.LabelOwner]; !ok {
		args.Add("label", runtime.LabelOwner)
	}
	containers, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, fmt.Errorf("docker: list containers: %w", err)
	}
	var out []runtime.Resource
	for _, c := range containers {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, runtime.Resource{Kind: runtime.KindContainer, ID: c.ID, Name: name, Labels: c.Labels, Created: time.Unix(c.Created, 0)})
	}
	networks, err := d.cli.NetworkList(ctx, network.ListOptions{Filters: args})
	if err != nil {
		return nil, fmt.Errorf("docker: list networks: %w", err)
	}
	for _, n := range networks {
		out = append(out, runtime.Resource{Kind: KindNetwork, ID: n.ID, Name: n.Name, Labels: n.Labels, Created: n.Created})
	}
	return out, nil
}
