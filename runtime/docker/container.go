package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/troupebench/troupe/runtime"
)

// Container is a container of this engine, as a trial handles it: what
// Create returns, and what Docker.Container gives for a container made
// otherwise (a service's, a test's). Besides runtime.Container it has
// Changes, the engine's diff, and Sidecars, its compose services.
type Container struct {
	d  *Docker
	id string
}

var _ runtime.Container = (*Container)(nil)

// Container is the handle of the engine's container id.
func (d *Docker) Container(id string) *Container { return &Container{d: d, id: id} }

// ID is the engine's container id.
func (c *Container) ID() string { return c.id }

// Start starts the created container.
func (c *Container) Start(ctx context.Context) error {
	if err := c.d.cli.ContainerStart(ctx, c.id, container.StartOptions{}); err != nil {
		return fmt.Errorf("docker: start container %s: %w", short(c.id), err)
	}
	return nil
}

// SetOnline connects the container to the network Create gave it, or
// disconnects it; either is a no-op when it already is so. A container
// created without a network cannot be given one.
func (c *Container) SetOnline(ctx context.Context, online bool) error {
	id := c.id
	info, err := c.d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return fmt.Errorf("docker: set the network of %s: %w", short(id), err)
	}
	netID := info.Config.Labels[labelNetwork]
	if netID == "" {
		return fmt.Errorf("docker: container %s was created without a network of its own (runtime.NetworkBridge): it cannot be put online", short(id))
	}
	// A container not yet started lists its network by name, its
	// endpoint's ids still empty.
	netName := cmp.Or(info.Config.Labels[labelJobNetwork], strings.TrimPrefix(info.Name, "/"))
	attached := false
	if info.NetworkSettings != nil {
		for name, ep := range info.NetworkSettings.Networks {
			attached = attached || ep.NetworkID == netID || name == netName
		}
	}
	switch {
	case online && !attached:
		err = c.d.cli.NetworkConnect(ctx, netID, id, nil)
	case !online && attached:
		err = c.d.cli.NetworkDisconnect(ctx, netID, id, true)
	}
	if err != nil {
		return fmt.Errorf("docker: put container %s %s: %w", short(id), map[bool]string{true: "online", false: "offline"}[online], err)
	}
	return nil
}

// CopyIn writes files into the container as one tar stream, with owner
// and mode in the tar headers (the engine keeps them; CopyUIDGID would
// look the numeric users up and fail). Missing parent folders are
// created, owned by root.
func (c *Container) CopyIn(ctx context.Context, files []runtime.File) error {
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		writeErr = runtime.WriteTar(pw, files)
		pw.CloseWithError(writeErr)
	})
	err := c.d.cli.CopyToContainer(ctx, c.id, "/", pr, container.CopyToContainerOptions{})
	pr.CloseWithError(errors.New("copy ended")) // unblocks the writer if the engine stopped reading
	wg.Wait()
	if err != nil {
		return fmt.Errorf("docker: copy %d files into %s: %w", len(files), short(c.id), err)
	}
	if writeErr != nil && !errors.Is(writeErr, io.ErrClosedPipe) {
		return fmt.Errorf("docker: copy into %s: %w", short(c.id), writeErr)
	}
	return nil
}

// CopyOut copies src out of the container into dst under dstPath: the
// engine's archive of src, extracted by runtime.ExtractTar.
func (c *Container) CopyOut(ctx context.Context, src string, dst *os.Root, dstPath string, limit int64) (skipped []string, err error) {
	rc, _, err := c.d.cli.CopyFromContainer(ctx, c.id, src)
	if err != nil {
		return nil, fmt.Errorf("docker: copy %s out of %s: %w", src, short(c.id), err)
	}
	defer rc.Close()
	skipped, err = runtime.ExtractTar(rc, src, dst, dstPath, limit)
	if err != nil {
		return skipped, fmt.Errorf("docker: copy %s out of %s: %w", src, short(c.id), err)
	}
	return skipped, nil
}

// Remove removes the container by force, with its anonymous volumes, its
// services and their network (Docker.Remove).
func (c *Container) Remove(ctx context.Context) error {
	return c.d.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: c.id})
}

// Changes lists what differs in the container's filesystem from its image
// (the engine's diff; mounts, troupe's binary among them, are not in it).
func (c *Container) Changes(ctx context.Context) ([]runtime.Change, error) {
	list, err := c.d.cli.ContainerDiff(ctx, c.id)
	if err != nil {
		return nil, fmt.Errorf("docker: diff container %s against its image: %w", short(c.id), err)
	}
	out := make([]runtime.Change, 0, len(list))
	for _, ch := range list {
		kind := runtime.ChangeModified
		switch ch.Kind {
		case container.ChangeAdd:
			kind = runtime.ChangeAdded
		case container.ChangeDelete:
			kind = runtime.ChangeDeleted
		}
		out = append(out, runtime.Change{Path: ch.Path, Kind: kind})
	}
	return out, nil
}
