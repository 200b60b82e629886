package main

import (
	"context"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/docker"
)

// baseImage is the image troupe's examples and tests build on.
const baseImage = "busybox:latest"

func newDoctorCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run trials, and say how to fix what cannot",
		Long: `Check the setup troupe run needs: the Docker engine answers (and which version), the
base image is there, a container with no network starts, there is free disk, the troupe
binary can be placed in containers, and no dead troupe process left resources behind.
Each failed check says how to fix it. Exit status 1 when any check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if failed := runDoctor(cmd.Context(), a.stdout); failed > 0 {
				return &reportedError{code: exitFailed}
			}
			return nil
		},
	}
}

// runDoctor prints each check and returns how many failed.
func runDoctor(ctx context.Context, out io.Writer) (failed int) {
	report := func(name string, err error, fix string, detail string) {
		if err != nil {
			failed++
			fmt.Fprintf(out, "FAIL  %s: %v\n      fix: %s\n", name, err, fix)
			return
		}
		fmt.Fprintf(out, "ok    %s: %s\n", name, detail)
	}

	// The checks are named for what they check; the errors already say
	// they come from docker.
	d, err := docker.New(ctx, shortVersion(), nil)
	if err != nil {
		report("engine", err, "start the Docker daemon (systemctl start docker, or dockerd &), or point DOCKER_HOST at one", "")
		return failed
	}
	defer d.Close()
	cli := d.Client()
	v, err := cli.ServerVersion(ctx)
	report("engine", err, "check that this user may use the Docker socket", fmt.Sprintf("Docker %s, API %s (negotiated %s)", v.Version, v.APIVersion, cli.ClientVersion()))

	_, err = cli.ImageInspect(ctx, baseImage)
	report("base image", err, "bash .ci/seed-images builds "+baseImage+" offline from Debian's busybox-static; or docker pull/load it", baseImage+" is present")

	if err == nil {
		err = tryContainer(ctx, d)
		report("no-network container", err, "read the error; troupe doctor needs to start a container with --network none", "one started and ran true")
	}

	info, ierr := cli.Info(ctx)
	if ierr == nil {
		free, serr := freeSpace(info.DockerRootDir)
		switch {
		case serr != nil:
			report("disk", nil, "", fmt.Sprintf("%s is not on this machine (remote engine); not checked", info.DockerRootDir))
		case free < 5<<30:
			report("disk", fmt.Errorf("only %.1f GiB free under %s", float64(free)/(1<<30), info.DockerRootDir), "free space: docker system prune removes unused images and build cache", "")
		default:
			report("disk", nil, "", fmt.Sprintf("%.1f GiB free under %s", float64(free)/(1<<30), info.DockerRootDir))
		}
	}

	// The same way troupe run gets its binary for the containers: a build
	// from the source happens here, once, if it is needed.
	bin, built, berr := selfBinary(ctx)
	switch {
	case berr != nil:
		report("troupe binary", berr, "install troupe with CGO_ENABLED=0 go install "+runtime.Module+"/cmd/troupe@latest", "")
	case built != "":
		report("troupe binary", nil, "", fmt.Sprintf("this build needs a dynamic loader (cgo); trials use a static copy built from %s: %s", built, bin.Path))
	default:
		report("troupe binary", nil, "", "static linux/amd64, can run in any container")
	}

	stale, err := runtime.Reap(ctx, d, d.Owner(), runtime.ReapOptions{DryRun: true})
	switch {
	case err != nil:
		report("leftovers", err, "check the engine", "")
	case len(stale) > 0:
		report("leftovers", fmt.Errorf("%d containers or networks of dead troupe processes", len(stale)), "troupe clean", "")
	default:
		report("leftovers", nil, "", "no resources of dead troupe processes")
	}
	return failed
}

// tryContainer starts a no-network container running true and removes it.
func tryContainer(ctx context.Context, d *docker.Docker) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	id, err := d.Create(ctx, runtime.ContainerSpec{Image: baseImage, Entrypoint: []string{"true"}, Labels: map[string]string{runtime.LabelTrial: "doctor"}})
	if err != nil {
		return err
	}
	defer d.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: id})
	wait, errs := d.Client().ContainerWait(ctx, id, container.WaitConditionNextExit)
	if err := d.Start(ctx, id); err != nil {
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
