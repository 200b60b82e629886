package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/fence"
)

// fenceTimeout bounds the helper container that installs the fence.
const fenceTimeout = time.Minute

// hostFence installs the host fence once per process, before the first
// bridge network a trial may use.
type hostFence struct {
	mu   sync.Mutex
	done bool
}

// trialBridge is the creation options of a bridge network for trials: its
// interface on the host is named fence.BridgePrefix and 12 hex digits
// (15 characters, Linux's limit), the name the host fence matches.
func trialBridge(labels map[string]string, internal bool, opts map[string]string) network.CreateOptions {
	b := make([]byte, 6)
	rand.Read(b)
	o := map[string]string{"com.docker.network.bridge.name": fence.BridgePrefix + hex.EncodeToString(b)}
	for k, v := range opts {
		o[k] = v
	}
	return network.CreateOptions{Driver: "bridge", Internal: internal, Labels: labels, Options: o}
}

// fenceHost installs the host fence (package fence) on the engine's
// machine, once per process: a helper container from image, in the host's
// network namespace with NET_ADMIN only, runs "troupe fence" from bin. Every
// troupe process installs it again on its first network: the table is
// replaced whole, so an engine restarted or a table removed by hand is
// fenced again. Without bin no trial network is made: a network the host
// is not fenced from is never given to agents.
func (d *Docker) fenceHost(ctx context.Context, image string, bin *runtime.Binary) error {
	d.fence.mu.Lock()
	defer d.fence.mu.Unlock()
	if d.fence.done {
		return nil
	}
	if bin == nil {
		return errors.New("docker: a container with a network needs troupe's binary (ContainerSpec.Binary): it installs the host fence that keeps trials from the host's own services")
	}
	if err := d.installFence(ctx, image, bin); err != nil {
		return fmt.Errorf("docker: fence the host from trial networks (docs/run.md, \"The host fence\"): %w", err)
	}
	d.fence.done = true
	return nil
}

func (d *Docker) installFence(ctx context.Context, image string, bin *runtime.Binary) error {
	ctx, cancel := context.WithTimeout(ctx, fenceTimeout)
	defer cancel()
	bm, err := d.binaryMount(ctx, bin, image)
	if err != nil {
		return err
	}
	cfg := &container.Config{Image: image, User: "0:0", Entrypoint: []string{runtime.BinaryPath, "fence"},
		Labels: d.labels(map[string]string{runtime.LabelTrial: "host-fence"})}
	host := &container.HostConfig{NetworkMode: "host", CapDrop: []string{"ALL"}, CapAdd: []string{"NET_ADMIN"},
		SecurityOpt: []string{"no-new-privileges:true"}, Mounts: []mount.Mount{bm}}
	resp, err := d.cli.ContainerCreate(ctx, cfg, host, nil, nil, nameFor(map[string]string{runtime.LabelTrial: "host-fence"}))
	if err != nil {
		return fmt.Errorf("create its helper container from %s: %w", image, err)
	}
	defer func() {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
		defer cancel()
		d.removeContainer(rmCtx, resp.ID)
	}()
	wait, waitErrs := d.cli.ContainerWait(ctx, resp.ID, container.WaitConditionNextExit)
	if err := d.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("start its helper container: %w", err)
	}
	select {
	case w := <-wait:
		if w.StatusCode != 0 {
			return fmt.Errorf("its helper exited %d: %s", w.StatusCode, d.tail(context.WithoutCancel(ctx), resp.ID))
		}
		return nil
	case err := <-waitErrs:
		return fmt.Errorf("wait for its helper: %w", err)
	}
}
