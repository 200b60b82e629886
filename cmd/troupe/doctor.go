package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/staticbin"
)

// baseImage is the image troupe's examples and tests build on.
const baseImage = "busybox:latest"

func newDoctorCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run trials, and say how to fix what cannot",
		Long: `Check the setup troupe run needs: the backend answers (the Docker engine, and which
version), the base image is there, a container with no network starts, there is free disk, the troupe
binary can be placed in containers, and no dead troupe process left resources behind.
With --runtime kubernetes: the cluster answers, and an offline pod with troupe's binary
image starts from the base image and runs an exec as a user that is not root.
Each failed check says how to fix it. Exit status 1 when any check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := a.openRuntime(cmd.Context(), cmd, runtimeOptions{})
			if _, usage := errors.AsType[*usageError](err); usage {
				return err
			}
			if rt != nil {
				defer rt.Close(context.WithoutCancel(cmd.Context()))
			}
			if failed := runDoctor(cmd.Context(), a.stdout, rt, err); failed > 0 {
				return &reportedError{code: exitFailed}
			}
			return nil
		},
	}
	runtimeFlag(cmd)
	return cmd
}

// checker is what troupe doctor needs of a backend: its name, its own
// checks, and what dead owners left on it.
type checker interface {
	reaper
	Name() string
	Check(ctx context.Context, image string) []runtime.Check
}

// runDoctor prints each check of the backend rt (or why it could not be
// opened) and troupe's own, and returns how many failed.
func runDoctor(ctx context.Context, out io.Writer, rt checker, openErr error) (failed int) {
	report := func(name string, err error, fix string, detail string) {
		if err != nil {
			failed++
			fmt.Fprintf(out, "FAIL  %s: %v\n      fix: %s\n", name, err, fix)
			return
		}
		fmt.Fprintf(out, "ok    %s: %s\n", name, detail)
	}

	// The checks are named for what they check; the errors already say
	// which backend they come from.
	if openErr != nil {
		if strings.HasPrefix(openErr.Error(), "kubernetes:") {
			report("cluster", openErr, "point --kubeconfig/--kube-context (or KUBECONFIG) at a running cluster; docs/runtime.md says what it needs", "")
		} else {
			report("engine", openErr, "start the Docker daemon (systemctl start docker, or dockerd &), or point DOCKER_HOST at one", "")
		}
		return failed
	}
	for _, c := range rt.Check(ctx, baseImage) {
		report(c.Name, c.Err, c.Fix, c.Detail)
	}

	// The same way troupe run gets its binary for the containers: a build
	// from the source happens here, once, if it is needed.
	bin, built, berr := selfBinary(ctx)
	switch {
	case berr != nil:
		report("troupe binary", berr, "install troupe with CGO_ENABLED=0 go install "+staticbin.Module+"/cmd/troupe@latest", "")
	case built != "":
		report("troupe binary", nil, "", fmt.Sprintf("this build needs a dynamic loader (cgo); trials use a static copy built from %s: %s", built, bin.Path))
	default:
		report("troupe binary", nil, "", "static linux/amd64, can run in any container")
	}

	stale, err := runtime.Reap(ctx, rt, rt.Owner(), runtime.ReapOptions{DryRun: true})
	switch {
	case err != nil:
		report("leftovers", err, "check the "+rt.Name()+" backend", "")
	case len(stale) > 0:
		report("leftovers", fmt.Errorf("%d resources of dead troupe processes", len(stale)), "troupe clean --runtime "+rt.Name(), "")
	default:
		report("leftovers", nil, "", "no resources of dead troupe processes")
	}
	return failed
}
