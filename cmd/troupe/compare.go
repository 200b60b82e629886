package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/report"
)

type compareOptions struct {
	baseline       string
	format         string
	out            string
	includeReplays bool
}

func newCompareCmd(a *app) *cobra.Command {
	var opts compareOptions
	cmd := &cobra.Command{
		Use:   "compare DIR...",
		Short: "Compare rosters: pass rates with intervals, paired differences, cost per solved task",
		Long: `Read the trial results under each DIR (job folders of troupe run, or folders of
jobs) and compare the conditions, grouped by manifest hash.

Per condition: trials, scored trials, passes, pass rate with its headline 95% interval
(task-clustered, CR1, when a task has several scored attempts, which are not
independent; else Wilson's), the Wilson and task-bootstrap intervals beside it,
mean reward, pass@k (the unbiased estimator, for the k every task has attempts for),
infrastructure failures (shown, never counted), cost per trial (mean and median), cost
per solved task, total cost (every trial, unscored ones included), usage and cost by
role, and wall time. A figure of the scored trials of a condition that has none is
null in JSON and "-" in tables, never 0. Against the baseline (the
first condition by name, or --baseline): on the (task, attempt) pairs both conditions
scored, the difference in pass rate with its headline 95% interval (task-clustered
when a task has several pairs, else the paired bootstrap's; fixed seed, stated; for a
sequential job of troupe run --until-decided, the anytime-valid interval of its test,
since fixed-sample intervals are wrong after optional stopping) and an exact McNemar
p-value; with fewer than 10 pairs it says there are too few to tell. Which interval
leads, and why, is printed. The counting policy is printed with the results. A result.json that
cannot be read is named in the report, and the rest is compared (exit 0). A replay (troupe
replay) is no trial of its roster: replays are left out, and the report says how many;
--include-replays counts them, at what their live calls cost.

Formats: table (default, for a terminal), markdown, json, html (one self-contained
page with charts: pass rates with intervals, cost against pass rate with both
intervals and the Pareto front, tasks by conditions with a legend).`,
		Example: `  troupe compare jobs/tb2
  troupe compare jobs/tb2-solo jobs/tb2-team --baseline tb2-solo --format markdown
  troupe compare jobs/ --format html --out report.html`,
		Args: minArgs(1, "at least one job folder"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(report.Formats, opts.format) {
				return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--format %q is not one of %s", opts.format, strings.Join(report.Formats, ", "))}
			}
			return runCompare(a.output(opts.format == report.FormatJSON || opts.format == report.FormatHTML), a.stderr, args, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.baseline, "baseline", "", "the condition the others are compared with (default: the first by name)")
	f.StringVar(&opts.format, "format", report.FormatTable, "table, markdown, json or html")
	f.StringVarP(&opts.out, "out", "o", "", "write to this file instead of standard output")
	f.BoolVar(&opts.includeReplays, "include-replays", false, "count replays (troupe replay) as trials of their rosters, at their live calls' cost")
	return cmd
}

// runCompare compares what could be read. A result that could not be
// (bad JSON, implausible figures, too big) does not fail the command while
// others can be compared: it is warned of on standard error and named in
// the report itself, in every format, so a saved report cannot hide it.
func runCompare(stdout, stderr io.Writer, dirs []string, opts compareOptions) (err error) {
	trials, loadErr := report.Load(dirs...)
	if loadErr != nil && len(trials) == 0 {
		return loadErr
	}
	if loadErr != nil {
		fmt.Fprintf(stderr, "warning: %v\n", loadErr)
	}
	trials, replays := report.Replays(trials, opts.includeReplays)
	c, err := report.Compare(trials, opts.baseline)
	if err != nil {
		return err
	}
	if replays != "" {
		c.Warnings = append(c.Warnings, replays)
	}
	c.Skipped = report.Skipped(loadErr)
	seq, seqErr := report.LoadSequential(dirs...)
	if seqErr != nil {
		fmt.Fprintf(stderr, "warning: %v\n", seqErr)
	}
	c.ApplySequential(seq)
	w := stdout
	if opts.out != "" {
		f, err := os.Create(opts.out)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := f.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}()
		w = f
	}
	return c.Write(w, opts.format)
}
