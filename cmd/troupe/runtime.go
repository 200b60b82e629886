package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/docker"
)

// runtimes are the container backends --runtime names.
var runtimes = []string{"docker"}

// runtimeOptions are the settings of a backend that a command gives.
type runtimeOptions struct {
	// rebuild builds task environments again (troupe run --rebuild).
	rebuild bool
}

// runtimeFlag adds --runtime, which run, replay, doctor and clean share.
func runtimeFlag(cmd *cobra.Command) {
	cmd.Flags().String("runtime", "docker", "the container backend: "+strings.Join(runtimes, ", ")+" (docker: the local engine, or DOCKER_HOST's)")
}

// openRuntime makes and opens the backend --runtime names (or
// TROUPE_RUNTIME, or the config file's runtime).
func (a *app) openRuntime(ctx context.Context, cmd *cobra.Command, opts runtimeOptions) (runtime.Runtime, error) {
	v, err := a.settings(cmd, "runtime")
	if err != nil {
		return nil, err
	}
	name := v.GetString("runtime")
	var rt runtime.Runtime
	switch name {
	case "", "docker":
		d := docker.New(shortVersion(), nil)
		d.Rebuild = opts.rebuild
		rt = d
	default:
		return nil, &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--runtime (or TROUPE_RUNTIME, or runtime: in the config file) %q is not a backend troupe has: %s", name, strings.Join(slices.Clone(runtimes), ", "))}
	}
	if err := rt.Open(ctx); err != nil {
		return nil, fmt.Errorf("%w\n(troupe doctor checks what trials need)", err)
	}
	return rt, nil
}
