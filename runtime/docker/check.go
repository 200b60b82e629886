package docker

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/troupebench/troupe/runtime"
)

// Check is troupe doctor's view of the engine: its version, the test
// image, a container with no network started from it, and the free disk
// under the engine's root.
func (d *Docker) Check(ctx context.Context, image string) []runtime.Check {
	var out []runtime.Check
	add := func(name string, err error, fix, detail string) {
		out = append(out, runtime.Check{Name: name, Err: err, Fix: fix, Detail: detail})
	}
	v, err := d.cli.ServerVersion(ctx)
	add("engine", err, "check that this user may use the Docker socket", fmt.Sprintf("Docker %s, API %s (negotiated %s)", v.Version, v.APIVersion, d.cli.ClientVersion()))

	_, err = d.cli.ImageInspect(ctx, image)
	add("base image", err, "bash .ci/seed-images builds "+image+" offline from Debian's busybox-static; or docker pull/load it", image+" is present")
	if err == nil {
		err = d.tryContainer(ctx, image)
		add("no-network container", err, "read the error; troupe doctor needs to start a container with --network none", "one started and ran true")
	}

	if info, err := d.cli.Info(ctx); err == nil {
		free, serr := freeSpace(info.DockerRootDir)
		switch {
		case serr != nil:
			add("disk", nil, "", fmt.Sprintf("%s is not on this machine (remote engine); not checked", info.DockerRootDir))
		case free < 5<<30:
			add("disk", fmt.Errorf("only %.1f GiB free under %s", float64(free)/(1<<30), info.DockerRootDir), "free space: docker system prune removes unused images and build cache", "")
		default:
			add("disk", nil, "", fmt.Sprintf("%.1f GiB free under %s", float64(free)/(1<<30), info.DockerRootDir))
		}
	}
	return out
}

// tryContainer starts a no-network container running true and removes it.
func (d *Docker) tryContainer(ctx context.Context, image string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := d.Create(ctx, runtime.ContainerSpec{Image: image, Entrypoint: []string{"true"}, Labels: map[string]string{runtime.LabelTrial: "doctor"}})
	if err != nil {
		return err
	}
	defer c.Remove(ctx)
	wait, errs := d.cli.ContainerWait(ctx, c.ID(), container.WaitConditionNextExit)
	if err := c.Start(ctx); err != nil {
		return err
	}
	select {
	case w := <-wait:
		if w.StatusCode != 0 {
			return fmt.Errorf("the container exited with %d", w.StatusCode)
		}
		return nil
	case err := <-errs:
		return err
	}
}

func freeSpace(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
