package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

func newTasksCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Work with Harbor-format tasks and datasets",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTasksLoadCmd(a), newTasksCheckCmd(a))
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
			return runTasksLoad(a.output(opts.json), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.strict, "strict", false, "refuse a task that has keys Harbor does not define")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object per task")
	return cmd
}

// taskReport is one task as tasks load reports it.
type taskReport struct {
	Task   string `json:"task"`
	Dir    string `json:"dir"`
	Status string `json:"status"` // loaded, warned, refused
	// Steps are a multi-step task's steps, in order.
	Steps    []string `json:"steps,omitempty"`
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
		if lerr == nil {
			for _, st := range t.Steps {
				r.Steps = append(r.Steps, st.Name)
			}
		}
		r.Task = filepath.Base(d)
		counts[r.Status]++
		if opts.json {
			enc.Encode(r)
			continue
		}
		fmt.Fprintf(out, "%-8s %s\n", r.Status, r.Dir)
		if len(r.Steps) > 0 {
			fmt.Fprintf(out, "         %d steps: %s\n", len(r.Steps), strings.Join(r.Steps, ", "))
		}
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

func newTasksCheckCmd(a *app) *cobra.Command {
	opts := runOptions{oracle: true, check: true, attempts: 1}
	cmd := &cobra.Command{
		Use:   "check PATH...",
		Short: "Run each task's own solution (the oracle) and its tests, and say which tasks are broken and why",
		Long: `Load, build and run the oracle on every task (a task folder, or a folder of tasks): a
trial per task in which solution/solve.sh runs, as the task's agent user, in place of a
team, and then the task's tests/test.sh. A task whose oracle does not pass is broken:
its environment does not build, its healthcheck fails, its solution or its tests are
wrong, or it needs what troupe does not give it. This is how to validate a dataset
before spending on models, and how troupe's own support of a task set is measured.

It is troupe run --oracle with one attempt, reported per task; the trial folders are
kept under --out (default jobs/job-<digest>, like run's) and the same command resumes.
Tasks without solution/solve.sh are refused before anything starts.

Exit status: 0 when every task passes with its oracle, 1 when any is broken (or the
check could not run), 2 for a usage error.`,
		Example: `  troupe tasks check examples/tasks
  troupe tasks check ~/datasets/terminal-bench-2 --concurrency 8 --timeout-multiplier 2
  troupe tasks check tasks/ --json | jq -r 'select(.status == "broken") | .task'`,
		Args: minArgs(1, "a task folder or a folder of tasks"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.tasks = args
			if opts.concurrency < 1 || opts.retries < 0 || opts.multiplier <= 0 {
				return &usageError{command: cmd.CommandPath(), err: errors.New("--concurrency must be at least 1, --retries at least 0, --timeout-multiplier above 0")}
			}
			_, cfg, err := a.artifactRoot(cmd)
			if err != nil {
				return err
			}
			if opts.network, err = a.networkPolicy(cmd); err != nil {
				return err
			}
			if opts.hostPaths, err = a.hostPaths(cmd); err != nil {
				return err
			}
			opts.readyTimeout = trial.DefaultLimits.Ready
			return runRun(cmd.Context(), a, cmd, opts, "", cfg, os.Args)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&opts.concurrency, "concurrency", "n", 4, "tasks checked at once")
	f.StringVarP(&opts.out, "out", "o", "", "the job folder (default jobs/job-<digest of the task paths>)")
	f.BoolVar(&opts.json, "json", false, "print one JSON object per task instead of the table")
	f.IntVar(&opts.retries, "retries", 1, "reruns of a task whose check ended unscored_infra")
	f.Float64Var(&opts.multiplier, "timeout-multiplier", 1, "scale every phase's timeout (build, agent, verifier, teardown)")
	f.BoolVar(&opts.strict, "strict", false, "refuse tasks whose task.toml has keys Harbor does not define")
	f.BoolVar(&opts.rebuild, "rebuild", false, "build each task environment again, the engine's layer cache off")
	networkFlag(cmd)
	runtimeFlag(cmd)
	hostPathFlag(cmd)
	return cmd
}

// checkReport is one task as tasks check reports it.
type checkReport struct {
	Task    string          `json:"task"`
	Dir     string          `json:"dir"`
	Status  string          `json:"status"` // ok, broken
	Outcome outcome.Outcome `json:"outcome"`
	Reward  *float64        `json:"reward"`
	Why     string          `json:"why,omitempty"`
	Trial   string          `json:"trial"`
}

// printCheck reports each task of an oracle job: ok when its oracle
// passed, else broken and why.
func printCheck(a *app, out string, res *job.Result, asJSON bool) error {
	var reports []checkReport
	for _, name := range slices.Sorted(maps.Keys(res.Trials)) {
		dir := filepath.Join(out, name)
		r := checkReport{Task: name, Trial: dir, Status: "broken", Outcome: res.Trials[name]}
		tr, err := trialdir.ReadResult(filepath.Join(dir, trialdir.Result))
		if err != nil {
			r.Why = "no result: " + err.Error()
			reports = append(reports, r)
			continue
		}
		r.Task, r.Dir, r.Reward = tr.TaskName, tr.TaskPath, tr.Reward
		switch {
		case tr.Outcome == outcome.Passed:
			r.Status = "ok"
		case tr.ExceptionInfo != nil:
			r.Why = fmt.Sprintf("%s: %s", tr.ExceptionInfo.ExceptionType, firstLine(tr.ExceptionInfo.ExceptionMessage, 300))
		case tr.Reward != nil:
			r.Why = fmt.Sprintf("the solution scored %g; tests/test.sh said: %s", *tr.Reward, lastLine(filepath.Join(dir, filepath.FromSlash(trialdir.VerifierStdout))))
		default:
			r.Why = string(tr.Outcome)
		}
		reports = append(reports, r)
	}
	broken := 0
	enc := json.NewEncoder(a.raw.stdout)
	for _, r := range reports {
		if r.Status != "ok" {
			broken++
		}
		if asJSON {
			enc.Encode(r)
			continue
		}
		fmt.Fprintf(a.stdout, "%-7s %s\n", r.Status, r.Task)
		if r.Why != "" {
			fmt.Fprintf(a.stdout, "        %s\n        (%s)\n", r.Why, r.Trial)
		}
	}
	if !asJSON {
		fmt.Fprintf(a.stdout, "%d tasks: %d pass with their own solution, %d broken; the trials are in %s\n", len(reports), len(reports)-broken, broken, out)
	}
	if broken > 0 {
		return &reportedError{code: exitFailed}
	}
	return nil
}

// lastLine is the last line a file holds, for a reason in one line.
func lastLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return clip.Tail(last, 300)
	}
	return "(nothing)"
}
