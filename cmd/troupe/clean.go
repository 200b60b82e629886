package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/runtime"
)

type cleanOptions struct {
	all    bool
	dryRun bool
}

func newCleanCmd(a *app) *cobra.Command {
	var opts cleanOptions
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove the containers and networks that dead troupe processes left behind",
		Long: `Every container and network troupe creates is labelled with its owner: the host, boot,
process id and start time of the troupe process that made it. clean removes those whose
owner process is gone (it crashed or was killed), on this host, and says what it removed.
troupe run does the same when it starts and when its job ends (what a killed troupe asked
for can land late). A troupe that is ending (a zombie, SIGKILL pending) counts as gone.

--all removes every troupe resource on the Docker engine, whoever owns it, running or
not, and the volumes that hold troupe's binary (one per build, troupe-bin-<digest>,
shared by that build's trial containers and kept between jobs). --dry-run lists what would be removed and removes nothing.

Images are a cache, and clean leaves them: the task environments troupe builds (troupe-env:<key>)
and the images of stacks' install scripts (troupe-stack:<key>); docker image rm removes them.`,
		Example: `  troupe clean --dry-run
  troupe clean
  troupe clean --all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := a.openRuntime(cmd.Context(), cmd, runtimeOptions{})
			if err != nil {
				return err
			}
			defer rt.Close(context.WithoutCancel(cmd.Context()))
			return runClean(cmd.Context(), a.stdout, rt, opts)
		},
	}
	runtimeFlag(cmd)
	cmd.Flags().BoolVar(&opts.all, "all", false, "remove every troupe resource, live owners' included")
	cmd.Flags().BoolVar(&opts.dryRun, "dry-run", false, "list what would be removed; remove nothing")
	return cmd
}

// binaryCache is a backend that keeps troupe's binary between jobs
// (runtime/docker's volumes), which only clean --all removes.
type binaryCache interface {
	RemoveBinaryVolumes(ctx context.Context, dryRun bool) ([]string, error)
}

// reaper is what removing dead owners' resources needs of a backend:
// the owner this process labels with (Reap's self), and troupe's
// resources, listed and removed.
type reaper interface {
	runtime.Cleaner
	Owner() runtime.Owner
}

func runClean(ctx context.Context, out io.Writer, rt reaper, opts cleanOptions) error {
	removed, err := runtime.Reap(ctx, rt, rt.Owner(), runtime.ReapOptions{All: opts.all, DryRun: opts.dryRun})
	verb := "removed"
	if opts.dryRun {
		verb = "would remove"
	}
	for _, r := range removed {
		fmt.Fprintf(out, "%s %s (owner %s, trial %s)\n", verb, r, r.Labels[runtime.LabelOwner], r.Labels[runtime.LabelTrial])
	}
	// Binary volumes are a cache that live jobs share: only --all removes them.
	var volumes []string
	if bc, ok := rt.(binaryCache); ok && opts.all {
		var verr error
		volumes, verr = bc.RemoveBinaryVolumes(ctx, opts.dryRun)
		for _, v := range volumes {
			fmt.Fprintf(out, "%s volume %s (troupe's binary)\n", verb, v)
		}
		err = errors.Join(err, verr)
	}
	if len(removed) == 0 && len(volumes) == 0 && err == nil {
		fmt.Fprintln(out, "nothing to clean")
	}
	return err
}

// reapDead removes what dead troupe processes left (troupe run does it when
// it starts and when its job ends) and says so on stderr; a failure is a
// warning: the job runs without it.
func reapDead(ctx context.Context, stderr io.Writer, rt reaper) {
	reaped, err := runtime.Reap(ctx, rt, rt.Owner(), runtime.ReapOptions{})
	if len(reaped) > 0 {
		fmt.Fprintf(stderr, "removed %d containers or networks left by troupe processes that died\n", len(reaped))
	}
	if err != nil {
		fmt.Fprintf(stderr, "warning: removing what dead troupe processes left: %v\n", err)
	}
}
