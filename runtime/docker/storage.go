package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
)

// ErrStorageUnsupported means the engine's storage driver cannot bound a
// container's writable layer (--storage-opt size): overlay2 needs xfs
// mounted with pquota, and fuse-overlayfs and vfs have no quota at all.
var ErrStorageUnsupported = errors.New("the engine cannot limit a container's storage (--storage-opt size)")

// storageProbe remembers, for the life of the process, whether the
// engine honours --storage-opt size: the storage driver does not change
// under a running engine, and each probe creates a container.
type storageProbe struct {
	mu     sync.Mutex
	probed bool
	err    error
}

// StorageLimit says whether a ContainerSpec's StorageMB holds on this
// engine: nil when it does, else an error wrapping ErrStorageUnsupported
// that quotes the engine. It asks once per process, by creating (and
// removing) a container of image with a size limit; image must be
// available. An answer that is not the engine's about storage (the image
// is missing, the engine is unreachable) is returned but not remembered.
func (d *Docker) StorageLimit(ctx context.Context, image string) error {
	d.storage.mu.Lock()
	defer d.storage.mu.Unlock()
	if d.storage.probed {
		return d.storage.err
	}
	labels := d.labels(map[string]string{"troupe.probe": "storage"})
	host := &container.HostConfig{NetworkMode: "none", StorageOpt: map[string]string{"size": "64M"}}
	resp, err := d.cli.ContainerCreate(ctx, &container.Config{Image: image, Entrypoint: []string{"/nonexistent"}, Labels: labels}, host, nil, nil, "")
	if err == nil {
		d.storage.probed = true
		return d.removeContainer(ctx, resp.ID)
	}
	if !storageRefusal(err) {
		return fmt.Errorf("docker: probe the storage limit: %w", err)
	}
	d.storage.probed = true
	d.storage.err = fmt.Errorf("%w: the engine says %q", ErrStorageUnsupported, err.Error())
	return d.storage.err
}

// storageRefusal reports whether a create failed for its --storage-opt:
// each driver words it its own way ("--storage-opt is not supported",
// "--storage-opt is supported only for overlay over xfs with 'pquota'
// mount option", "Storage Option not supported").
func storageRefusal(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "storage-opt") || strings.Contains(msg, "storage option") || strings.Contains(msg, "storageopt")
}
