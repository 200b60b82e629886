package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/task"
)

func newTasksCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Work with Harbor-format tasks and datasets",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTasksLoadCmd(a))
	return cmd
}

type tasksLoadOptions struct {
	paths  []string
	strict bool
	json   bool
}

func newTasksLoadCmd(a *app) *cobra.Command {
	var opts tasksLoadOptions
	cmd := &cobra.Command{
		Use:   "load PATH...",
		Short: "Read tasks as troupe run would, and say which load, with what warnings, and why others do not",
		Long: `Read each task (a task folder, or a folder of tasks: a dataset) exactly as troupe run
reads it, without starting anything, and report each: loaded, loaded with warnings (keys
Harbor does not define either: both ignore them), or refused, with every reason, each
naming its file and line. docs/run.md lists every key of task.toml and what troupe does
with it. Host variables named by ${VAR} in env tables are read as troupe run would.

Exit status: 0 when every task loads, 1 when any is refused (or, with --strict, warned
about), 2 for a usage error.`,
		Example: `  troupe tasks load examples/tasks
  troupe tasks load ~/datasets/terminal-bench-2 --json | jq -r 'select(.status != "loaded") | .task'`,
		Args: minArgs(1, "a task folder or a folder of tasks"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.paths = args
			return runTasksLoad(a.stdout, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.strict, "strict", false, "refuse a task that has keys Harbor does not define")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object per task")
	return cmd
}

// taskReport is one task as tasks load reports it.
type taskReport struct {
	Task     string   `json:"task"`
	Dir      string   `json:"dir"`
	Status   string   `json:"status"` // loaded, warned, refused
	Warnings []string `json:"warnings,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

func runTasksLoad(out io.Writer, opts tasksLoadOptions) error {
	dirs, err := task.Dirs(opts.paths)
	if err != nil && len(dirs) == 0 {
		return err
	}
	counts := map[string]int{}
	enc := json.NewEncoder(out)
	for _, d := range dirs {
		r := taskReport{Dir: d, Status: "loaded"}
		t, lerr := task.Load(d, task.Options{Strict: opts.strict})
		switch {
		case lerr != nil:
			r.Status = "refused"
			r.Problems = problemLines(lerr)
		case len(t.Warnings) > 0:
			r.Status, r.Warnings = "warned", t.Warnings
		}
		r.Task = filepath.Base(d)
		counts[r.Status]++
		if opts.json {
			enc.Encode(r)
			continue
		}
		fmt.Fprintf(out, "%-8s %s\n", r.Status, r.Dir)
		for _, line := range append(r.Problems, r.Warnings...) {
			fmt.Fprintf(out, "         %s\n", line)
		}
	}
	if !opts.json {
		fmt.Fprintf(out, "%d tasks: %d loaded, %d loaded with warnings, %d refused\n", len(dirs), counts["loaded"], counts["warned"], counts["refused"])
	}
	if err != nil {
		return err // a path that was neither a task nor a folder of tasks
	}
	if counts["refused"] > 0 {
		return &reportedError{code: exitFailed}
	}
	return nil
}

// problemLines splits a task's error into its problems, without the line
// that names the task.
func problemLines(err error) []string {
	var lines []string
	for i, line := range strings.Split(err.Error(), "\n") {
		if i == 0 && strings.HasSuffix(line, "is not valid:") || strings.TrimSpace(line) == "" {
			continue
		}
		lines = append(lines, line)
	}
	return lines
}
