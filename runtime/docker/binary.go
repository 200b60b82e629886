package docker

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/troupebench/troupe/runtime"
)

// labelBinary marks the volumes that hold troupe's binary, by its digest.
// They are a cache shared by every trial of that binary, not owned by one
// process: the reaper leaves them, troupe clean --all removes them.
const labelBinary = "troupe.binary"

// DefaultBinaryVolumePrefix starts the names of the volumes that hold
// troupe's binary: troupe-bin-<digest>.
const DefaultBinaryVolumePrefix = "troupe-bin-"

// binaryVolumes serialises the filling of each binary volume.
type binaryVolumes struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (d *Docker) binaryVolumeName(bin *runtime.Binary) string {
	return d.BinaryVolumePrefix + bin.SHA256[:24]
}

// binaryMount is the read-only mount of a volume holding bin, at the folder
// of runtime.BinaryPath. The volume is filled once per digest: copying a
// 16 MB binary into every container costs about 110 ms a trial.
func (d *Docker) binaryMount(ctx context.Context, bin *runtime.Binary, image string) (mount.Mount, error) {
	name := d.binaryVolumeName(bin)
	m := mount.Mount{Type: mount.TypeVolume, Source: name, Target: path.Dir(runtime.BinaryPath), ReadOnly: true}
	d.bins.mu.Lock()
	lock, ok := d.bins.locks[name]
	if !ok {
		lock = &sync.Mutex{}
		d.bins.locks[name] = lock
	}
	d.bins.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()
	// Checked every time (two inspections, a few milliseconds): a volume
	// removed meanwhile (troupe clean --all) would otherwise be created
	// again, empty, by the engine when the container mounts it. A marker
	// volume, made after the copy, says the data volume is whole: a
	// process that died while filling leaves a data volume without one.
	marker := name + "-ok"
	_, err := d.cli.VolumeInspect(ctx, marker)
	if err == nil {
		_, err = d.cli.VolumeInspect(ctx, name)
	}
	if err == nil {
		return m, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return m, fmt.Errorf("docker: binary volume: %w", err)
	}
	if err := d.fillBinaryVolume(ctx, name, bin, image); err != nil {
		return m, err
	}
	if _, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: marker, Labels: map[string]string{labelBinary: bin.SHA256, runtime.LabelVersion: d.version}}); err != nil {
		return m, fmt.Errorf("docker: binary volume: %w", err)
	}
	return m, nil
}

// fillBinaryVolume (re)creates the volume and copies the binary into it
// through a created, never started, helper container from image.
func (d *Docker) fillBinaryVolume(ctx context.Context, name string, bin *runtime.Binary, image string) error {
	if err := d.cli.VolumeRemove(ctx, name, true); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: remove the partial binary volume %s: %w", name, err)
	}
	if _, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: map[string]string{labelBinary: bin.SHA256, runtime.LabelVersion: d.version}}); err != nil {
		return fmt.Errorf("docker: create binary volume: %w", err)
	}
	labels := d.labels(map[string]string{runtime.LabelTrial: "binary-volume"})
	host := &container.HostConfig{NetworkMode: container.NetworkMode(runtime.NetworkNone),
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: path.Dir(runtime.BinaryPath)}}}
	resp, err := d.cli.ContainerCreate(ctx, &container.Config{Image: image, Entrypoint: []string{runtime.BinaryPath}, Labels: labels}, host, nil, nil, "")
	if err != nil {
		return fmt.Errorf("docker: fill binary volume: %w", err)
	}
	helper := d.Container(resp.ID)
	copyErr := helper.CopyIn(ctx, []runtime.File{{Path: runtime.BinaryPath, Data: bin.Data, Mode: 0o755}})
	rmErr := helper.Remove(ctx)
	if err := errors.Join(copyErr, rmErr); err != nil {
		return fmt.Errorf("docker: fill binary volume %s: %w", name, err)
	}
	return nil
}

// RemoveBinaryVolumes removes the volumes that cache troupe binaries under
// this engine's prefix (with their markers) and returns their names; a
// volume in use is left, with an error.
func (d *Docker) RemoveBinaryVolumes(ctx context.Context, dryRun bool) ([]string, error) {
	list, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labelBinary))})
	if err != nil {
		return nil, fmt.Errorf("docker: list binary volumes: %w", err)
	}
	var removed []string
	var errs []error
	for _, v := range list.Volumes {
		if !strings.HasPrefix(v.Name, d.BinaryVolumePrefix) {
			continue
		}
		if !dryRun {
			if err := d.cli.VolumeRemove(ctx, v.Name, false); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("docker: remove volume %s: %w", v.Name, err))
				continue
			}
		}
		removed = append(removed, v.Name)
	}
	return removed, errors.Join(errs...)
}

// RemoveBinaryVolume removes the volume of one binary and its marker.
func (d *Docker) RemoveBinaryVolume(ctx context.Context, bin *runtime.Binary) error {
	var errs []error
	for _, v := range []string{d.binaryVolumeName(bin) + "-ok", d.binaryVolumeName(bin)} {
		if err := d.cli.VolumeRemove(ctx, v, false); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("docker: remove volume %s: %w", v, err))
		}
	}
	return errors.Join(errs...)
}
