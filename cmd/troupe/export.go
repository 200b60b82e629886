package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/atif"
)

func newExportCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write a trial in other tools' formats",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newExportATIFCmd(a))
	return cmd
}

// exportATIFOptions are troupe export atif's inputs.
type exportATIFOptions struct {
	trialDir, out string
	limits        recordLimitFlags
}

func newExportATIFCmd(a *app) *cobra.Command {
	var opts exportATIFOptions
	cmd := &cobra.Command{
		Use:   "atif TRIAL_DIR",
		Short: "Write a trial's agents and team channel as ATIF trajectories, for Harbor's tools",
		Long: `Write each agent of a trial as a trajectory in Harbor's Agent Trajectory Interchange
Format (ATIF-v1.7), rebuilt from its conversation record (agents/<id>/llm-conversation.jsonl.gz,
kept by troupe run --record full, the default): its system and user input, one agent step per
model call with its text, tool calls and metrics, and the tool results as observations. The team
channel's messages (relay/transcript.jsonl) become team.json. One JSON file per agent, <id>.json,
and team.json go to --out (default TRIAL_DIR/atif/).

An agent without a conversation record (a trial run with --record meta) has no trajectory; the
team's is written all the same. See docs/run.md, "Exporting to ATIF".`,
		Example: "  troupe export atif jobs/tb2/fix-git__team__1\n  troupe export atif jobs/tb2/fix-git__team__1 --out fix-git-atif",
		Args:    minArgs(1, "a trial folder"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.trialDir = args[0]
			return runExportATIF(a.stdout, a.stderr, opts)
		},
	}
	cmd.Flags().StringVar(&opts.out, "out", "", "folder to write the trajectories into (default TRIAL_DIR/atif)")
	opts.limits.register(cmd)
	return cmd
}

func runExportATIF(out, errOut io.Writer, opts exportATIFOptions) error {
	x, err := atif.TrialLimits(opts.trialDir, opts.limits.limits())
	if err != nil {
		return fmt.Errorf("export %s: %w", opts.trialDir, err)
	}
	for _, w := range x.Warnings {
		fmt.Fprintf(errOut, "warning: %s\n", w)
	}
	dir := opts.out
	if dir == "" {
		dir = filepath.Join(opts.trialDir, "atif")
	}
	written, err := atif.Write(dir, x.Files)
	for i, p := range written {
		f := x.Files[i]
		if f.Calls > 0 {
			fmt.Fprintf(out, "wrote %s: %s, %d steps from %d model calls\n", p, f.Trajectory.Agent.Name, len(f.Trajectory.Steps), f.Calls)
		} else {
			fmt.Fprintf(out, "wrote %s: the team channel, %d steps\n", p, len(f.Trajectory.Steps))
		}
	}
	for _, m := range x.Missing {
		fmt.Fprintf(out, "no trajectory for %s: %s\n", m.Agent, m.Reason)
	}
	return err
}
