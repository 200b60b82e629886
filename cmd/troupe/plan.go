package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/report"
)

type planOptions struct {
	baseline    string
	delta       float64
	alpha       float64
	power       float64
	tasks       int
	scope       string
	icc         float64
	iccSet      bool
	passRates   string
	maxAttempts int
	format      string
}

// planAttempts are the attempts per task the "other designs" show.
var planAttempts = []int{1, 2, 3, 5, 10}

func newPlanCmd(a *app) *cobra.Command {
	opts := planOptions{alpha: 0.05, power: 0.8, scope: string(decide.ScopePopulation), format: "table"}
	cmd := &cobra.Command{
		Use:   "plan [PILOT_DIR...]",
		Short: "Size a comparison: tasks × attempts to detect a difference, and what it costs",
		Long: `From a pilot job (or stated pass rates), find how many tasks × attempts each
condition needs to detect a difference of --delta in pass rate against the baseline,
with power --power at two-sided level --alpha, in troupe's paired design (every
(task, attempt) run under both conditions), and what that costs at the pilot's cost
and time per scored trial.

The variance comes from the pilot's paired results: within a task (what more attempts
average away) and between tasks (what only more tasks do), by the analysis of
variance; with one attempt per task the two cannot be told apart, and the plan
assumes the split that needs more trials (or give --icc, the within-task correlation
of the paired differences). With --pass-rates, a pair's two outcomes are taken as
independent, which errs on the safe side.

--scope population (the default) plans for the difference on tasks like these, the
task-clustered test troupe compare leads with; --scope tasks for the difference on
the --tasks tasks themselves, where running every task leaves no between-task error:
what troupe run --until-decided decides. --tasks is the benchmark's number of tasks,
the most a design may use (default: the pilot's).

Every figure is as good as the pilot: a pilot of a few dozen pairs estimates the
variance to a few tens of percent. See docs/compare.md.`,
		Example: `  troupe plan jobs/pilot --delta 0.1
  troupe plan jobs/pilot --baseline solo --delta 0.05 --power 0.9 --tasks 89 --format json
  troupe plan --pass-rates solo=0.5,team=0.6 --tasks 89 --delta 0.1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.iccSet = cmd.Flags().Changed("icc")
			if err := opts.check(args); err != nil {
				return &usageError{command: cmd.CommandPath(), err: err}
			}
			return runPlan(a.output(opts.format == "json"), a.stderr, args, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.baseline, "baseline", "", "the condition the others are compared with (default: the first by name, or the first of --pass-rates)")
	f.Float64Var(&opts.delta, "delta", 0, "the difference in pass rate to detect, in (0, 1), e.g. 0.1 for 10 points (required)")
	f.Float64Var(&opts.alpha, "alpha", opts.alpha, "two-sided level of the test")
	f.Float64Var(&opts.power, "power", opts.power, "chance of detecting a difference of --delta (1 − β)")
	f.IntVar(&opts.tasks, "tasks", 0, "the benchmark's number of tasks, the most a design uses (default: the pilot's; required with --pass-rates)")
	f.StringVar(&opts.scope, "scope", opts.scope, "population (tasks like these) or tasks (these tasks)")
	f.Float64Var(&opts.icc, "icc", 0, "within-task correlation of the paired differences, in [0, 1] (default: measured by the pilot)")
	f.StringVar(&opts.passRates, "pass-rates", "", "stated pass rates instead of a pilot: name=rate,name=rate,…")
	f.IntVar(&opts.maxAttempts, "max-attempts", decide.DefaultMaxAttempts, "the most attempts per task a design may use")
	f.StringVar(&opts.format, "format", opts.format, "table or json")
	return cmd
}

// check finds the command-line mistakes, all at once.
func (o planOptions) check(dirs []string) error {
	var errs []error
	switch {
	case len(dirs) == 0 && o.passRates == "":
		errs = append(errs, errors.New("give pilot job folders, or --pass-rates"))
	case len(dirs) > 0 && o.passRates != "":
		errs = append(errs, errors.New("give pilot job folders or --pass-rates, not both"))
	case o.passRates != "" && o.tasks == 0:
		errs = append(errs, errors.New("--pass-rates needs --tasks, the benchmark's number of tasks"))
	}
	if o.delta == 0 {
		errs = append(errs, errors.New("--delta, the difference to detect, is required"))
	}
	if o.format != "table" && o.format != "json" {
		errs = append(errs, fmt.Errorf("--format %q is not one of table, json", o.format))
	}
	if err := o.goal(2).Validate(); err != nil && o.delta != 0 {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// goal is what every condition's design must reach, for a benchmark of
// tasks tasks unless --tasks says otherwise.
func (o planOptions) goal(tasks int) decide.Goal {
	if o.tasks > 0 {
		tasks = o.tasks
	}
	return decide.Goal{Delta: o.delta, Alpha: o.alpha, Power: o.power, Tasks: tasks, Scope: decide.Scope(o.scope), MaxAttempts: o.maxAttempts}
}

// planInput is one condition as a plan sees it.
type planInput struct {
	name     string
	variance decide.Variance
	err      error // no variance: no design
	pairs    int   // the pilot's pairs and their tasks (0 with stated rates)
	tasks    int
	up, down int // the pilot's discordant pairs
	perTrial *decide.PerTrial
}

// planReport is troupe plan's answer, as JSON; the table says the same.
type planReport struct {
	Goal       decide.Goal      `json:"goal"`
	Source     string           `json:"source"`
	Baseline   string           `json:"baseline"`
	BaseTrial  *decide.PerTrial `json:"baseline_per_trial,omitempty"`
	Conditions []planRow        `json:"conditions"`
	// Job is one job that runs every roster on the largest design: what
	// troupe run with that many tasks and attempts costs.
	Job   *planJob `json:"job,omitempty"`
	Notes []string `json:"notes"`
}

type planRow struct {
	Condition string `json:"condition"`
	// The pilot's paired results: pairs on tasks, and the share where
	// only this condition passed, or only the baseline.
	PilotPairs       int             `json:"pilot_pairs,omitempty"`
	PilotTasks       int             `json:"pilot_tasks,omitempty"`
	OnlyThisRate     *float64        `json:"pilot_only_condition_passed,omitempty"`
	OnlyBaselineRate *float64        `json:"pilot_only_baseline_passed,omitempty"`
	Variance         decide.Variance `json:"variance"`
	ICC              *float64        `json:"icc"`
	Design           *decide.Design  `json:"design"`
	// Spend is what the design's trials cost, this condition's and the
	// baseline's, at the pilot's figures.
	Spend        *decide.Spend    `json:"spend,omitempty"`
	PerTrial     *decide.PerTrial `json:"per_trial,omitempty"`
	Alternatives []planAlt        `json:"alternatives"`
	Error        string           `json:"error,omitempty"`
}

// planAlt is the design with the fewest tasks for some attempts per task,
// or none (Design nil) when every task is not enough.
type planAlt struct {
	Attempts int            `json:"attempts"`
	Design   *decide.Design `json:"design"`
}

type planJob struct {
	Tasks    int           `json:"tasks"`
	Attempts int           `json:"attempts"`
	Spend    *decide.Spend `json:"spend,omitempty"`
}

func runPlan(stdout, stderr io.Writer, dirs []string, opts planOptions) error {
	var inputs []planInput
	var base string
	var baseTrial *decide.PerTrial
	var tasks int
	var err error
	source := "stated pass rates"
	if opts.passRates != "" {
		inputs, base, err = statedInputs(opts.passRates, opts.baseline)
	} else {
		source = "pilot " + strings.Join(dirs, ", ")
		inputs, base, baseTrial, tasks, err = pilotInputs(stderr, dirs, opts.baseline)
	}
	if err != nil {
		return err
	}
	rep := planReport{Goal: opts.goal(tasks), Source: source, Baseline: base, BaseTrial: baseTrial, Notes: []string{}}
	if opts.iccSet {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the within-task correlation is stated (--icc %g), not measured", opts.icc))
	}
	for _, in := range inputs {
		rep.Conditions = append(rep.Conditions, planCondition(in, rep.Goal, opts, baseTrial))
	}
	rep.Job = planWholeJob(rep, inputs, baseTrial)
	rep.Notes = append(rep.Notes, planNotes(rep)...)
	if opts.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		writePlanTable(stdout, rep)
	}
	if !slices.ContainsFunc(rep.Conditions, func(r planRow) bool { return r.Design != nil }) {
		return &reportedError{code: exitFailed}
	}
	return nil
}

// statedInputs are the conditions of --pass-rates name=rate,…, against the
// baseline (--baseline, or the first named).
func statedInputs(spec, baseline string) ([]planInput, string, error) {
	type rate struct {
		name string
		p    float64
	}
	var rates []rate
	for _, part := range strings.Split(spec, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		p, err := strconv.ParseFloat(value, 64)
		if !ok || name == "" || err != nil {
			return nil, "", fmt.Errorf("--pass-rates %q: each entry is name=rate (e.g. solo=0.5)", part)
		}
		if slices.ContainsFunc(rates, func(r rate) bool { return r.name == name }) {
			return nil, "", fmt.Errorf("--pass-rates names %q twice", name)
		}
		rates = append(rates, rate{name, p})
	}
	if len(rates) < 2 {
		return nil, "", errors.New("--pass-rates needs the baseline and at least one other condition")
	}
	bi := 0
	if baseline != "" {
		if bi = slices.IndexFunc(rates, func(r rate) bool { return r.name == baseline }); bi < 0 {
			return nil, "", fmt.Errorf("--baseline %q is not among --pass-rates", baseline)
		}
	}
	var out []planInput
	for i, r := range rates {
		if i == bi {
			continue
		}
		v, err := decide.VarianceFromRates(rates[bi].p, r.p)
		out = append(out, planInput{name: r.name, variance: v, err: err})
	}
	return out, rates[bi].name, nil
}

// pilotInputs reads the pilot's results and measures, for each condition
// against the baseline, its paired variance and its cost and time per
// scored trial (all it spent, failures and redone runs included, over
// what was scored).
func pilotInputs(stderr io.Writer, dirs []string, baseline string) ([]planInput, string, *decide.PerTrial, int, error) {
	trials, loadErr := report.Load(dirs...)
	if loadErr != nil && len(trials) == 0 {
		return nil, "", nil, 0, loadErr
	}
	if loadErr != nil {
		fmt.Fprintf(stderr, "warning: %v\n", loadErr)
	}
	// A replay is no trial of its roster: its calls were the recording's.
	trials, replays := report.Replays(trials, false)
	if replays != "" {
		fmt.Fprintf(stderr, "note: %s\n", replays)
	}
	c, err := report.Compare(trials, baseline)
	if err != nil {
		return nil, "", nil, 0, err
	}
	if len(c.Paired) == 0 {
		return nil, "", nil, 0, fmt.Errorf("the pilot has one condition (%s): a plan compares conditions with a baseline", c.Baseline)
	}
	perTrial := map[string]*decide.PerTrial{}
	for _, cd := range c.Conditions {
		if cd.Scored > 0 {
			perTrial[cd.Name] = &decide.PerTrial{CostUSD: cd.TotalCostUSD / modelcall.USD(cd.Scored), Wall: cd.WallMean}
		}
	}
	var out []planInput
	for _, p := range c.Paired {
		v, err := decide.EstimateVariance(p.ByTask)
		if err != nil {
			err = fmt.Errorf("pilot pairs with %s: %w", c.Baseline, err)
		}
		out = append(out, planInput{name: p.Condition, variance: v, err: err, pairs: p.Pairs, tasks: len(p.ByTask),
			up: p.OnlyThis, down: p.OnlyBaseline, perTrial: perTrial[p.Condition]})
	}
	return out, c.Baseline, perTrial[c.Baseline], len(c.Tasks), nil
}

// planCondition plans one condition.
func planCondition(in planInput, g decide.Goal, opts planOptions, baseTrial *decide.PerTrial) planRow {
	row := planRow{Condition: in.name, PilotPairs: in.pairs, PilotTasks: in.tasks, PerTrial: in.perTrial, Alternatives: []planAlt{}}
	if in.pairs > 0 {
		up, down := float64(in.up)/float64(in.pairs), float64(in.down)/float64(in.pairs)
		row.OnlyThisRate, row.OnlyBaselineRate = &up, &down
	}
	if in.err != nil {
		row.Error = in.err.Error()
		return row
	}
	v := in.variance
	if opts.iccSet {
		var err error
		if v, err = v.WithICC(opts.icc); err != nil {
			row.Error = err.Error()
			return row
		}
	}
	row.Variance = v
	if icc := v.ICC(); !math.IsNaN(icc) {
		row.ICC = &icc
	}
	d, err := decide.Plan(v, g)
	if err != nil {
		row.Error = err.Error()
	} else {
		row.Design = &d
		if in.perTrial != nil && baseTrial != nil {
			s := in.perTrial.Spend(d.Pairs()).Plus(baseTrial.Spend(d.Pairs()))
			row.Spend = &s
		}
	}
	for _, k := range planAttempts {
		if k > g.MaxAttempts && g.MaxAttempts > 0 {
			break
		}
		alt := planAlt{Attempts: k}
		if d, ok := g.FewestTasks(v, k); ok {
			alt.Design = &d
		}
		row.Alternatives = append(row.Alternatives, alt)
	}
	return row
}

// planWholeJob is one job that runs every roster, the baseline with them,
// on the largest of the designs: as many tasks as the design with the
// most, each as many times as the design with the most attempts.
func planWholeJob(rep planReport, inputs []planInput, baseTrial *decide.PerTrial) *planJob {
	job := &planJob{}
	for _, r := range rep.Conditions {
		if r.Design != nil {
			job.Tasks, job.Attempts = max(job.Tasks, r.Design.Tasks), max(job.Attempts, r.Design.Attempts)
		}
	}
	if job.Tasks == 0 {
		return nil
	}
	n := job.Tasks * job.Attempts
	if baseTrial == nil {
		return job
	}
	total := baseTrial.Spend(n)
	for _, in := range inputs {
		if in.perTrial == nil {
			return job
		}
		total = total.Plus(in.perTrial.Spend(n))
	}
	job.Spend = &total
	return job
}

// planNotes say what a reader of the figures must know.
func planNotes(rep planReport) []string {
	var notes []string
	for _, r := range rep.Conditions {
		if r.Error == "" && !r.Variance.Split {
			notes = append(notes, fmt.Sprintf("%s: the variance within and between tasks cannot be told apart (one attempt per task, or stated rates): the plan assumes the split that needs more trials; a pilot with 2 or more attempts per task, or --icc, may need fewer", r.Condition))
		}
	}
	if rep.Goal.Scope == decide.ScopeTasks {
		notes = append(notes, fmt.Sprintf("for the difference on these %d tasks: troupe compare's task-clustered interval, for tasks like these, is wider", rep.Goal.Tasks))
	}
	return notes
}

func writePlanTable(w io.Writer, rep planReport) {
	g := rep.Goal
	about := fmt.Sprintf("on tasks like these (at most %d tasks)", g.Tasks)
	if g.Scope == decide.ScopeTasks {
		about = fmt.Sprintf("on these %d tasks", g.Tasks)
	}
	fmt.Fprintf(w, "Plan: detect a difference of %s in pass rate against %s, %s, two-sided α = %g, power %s; from %s.\n",
		pp(g.Delta), rep.Baseline, about, g.Alpha, pc(g.Power), rep.Source)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "condition\tpilot pairs (tasks)\tonly this / only baseline\twithin-task corr.\ttasks × attempts\tpairs\tpower\tcost\ttrial time")
	for _, r := range rep.Conditions {
		pilot, disc := "-", "-"
		if r.PilotPairs > 0 {
			pilot = fmt.Sprintf("%d (%d)", r.PilotPairs, r.PilotTasks)
			disc = fmt.Sprintf("%s / %s", pc(*r.OnlyThisRate), pc(*r.OnlyBaselineRate))
		}
		icc := "unknown"
		if r.ICC != nil {
			icc = fmt.Sprintf("%.2f", *r.ICC)
		}
		design, pairs, power, cost, wall := "-", "-", "-", "-", "-"
		if d := r.Design; d != nil {
			design, pairs, power = fmt.Sprintf("%d × %d", d.Tasks, d.Attempts), fmt.Sprint(d.Pairs()), pc(d.Power)
		}
		if s := r.Spend; s != nil {
			cost, wall = fmt.Sprintf("$%.2f", s.CostUSD), trialTime(s.Wall)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Condition, pilot, disc, icc, design, pairs, power, cost, wall)
	}
	tw.Flush()
	fmt.Fprintln(w, "pairs: (task, attempt) run under the condition and the baseline both; cost and trial time are both sides' trials, at the pilot's figures per scored trial (trial time is summed: divide by the job's concurrency).")
	for _, r := range rep.Conditions {
		if r.Error != "" {
			fmt.Fprintf(w, "%s: %s.\n", r.Condition, r.Error)
		}
	}
	if j := rep.Job; j != nil {
		line := fmt.Sprintf("One job for all: every roster on %d tasks × %d attempts, %d trials", j.Tasks, j.Attempts, j.Tasks*j.Attempts*(len(rep.Conditions)+1))
		if j.Spend != nil {
			line += fmt.Sprintf(", $%.2f, %s of trial time", j.Spend.CostUSD, trialTime(j.Spend.Wall))
		}
		fmt.Fprintln(w, line+".")
	}
	fmt.Fprintln(w, "\nOther designs: the fewest tasks for each number of attempts.")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"condition"}
	for _, k := range planAttempts {
		header = append(header, fmt.Sprintf("%d attempt(s)", k))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rep.Conditions {
		cells := []string{r.Condition}
		for _, a := range r.Alternatives {
			cell := "-"
			if a.Design != nil {
				cell = fmt.Sprintf("%d × %d", a.Design.Tasks, a.Attempts)
			}
			cells = append(cells, cell)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "Note: %s.\n", n)
	}
}

// trialTime is a sum of trial times to the minute ("7h42m"), or to the
// second under a minute; "-" when the pilot had no times.
func trialTime(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Minute:
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

// pp is a difference in percentage points; pc a share in percent.
func pp(v float64) string { return strconv.FormatFloat(100*v, 'f', -1, 64) + " pp" }
func pc(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
