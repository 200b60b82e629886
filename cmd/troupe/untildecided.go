package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/job"
)

// sequential is the test of --until-decided and the rounds it may run,
// against the fixed design that has --power at --delta. A pair's variance
// sizes both: the pilot's (the largest of its conditions', with the same
// baseline), or else that of two rosters passing half the time
// independently, the most it can be: a plan errs on the safe side.
func sequential(stderr io.Writer, conds []job.Condition, tasks int, opts runOptions) (*job.Sequential, int, error) {
	if len(conds) < 2 {
		return nil, 0, &usageError{command: "troupe run", err: errors.New("--until-decided compares manifests with a baseline: give two manifests or more")}
	}
	if !(opts.delta > 0 && opts.delta < 1) {
		return nil, 0, &usageError{command: "troupe run", err: fmt.Errorf("--until-decided needs --delta, the difference in pass rate that matters, in (0, 1) (e.g. --delta 0.1); got %v", opts.delta)}
	}
	baseline := cmp.Or(opts.baseline, conds[0].Team.Manifest.Condition)
	if !slices.ContainsFunc(conds, func(c job.Condition) bool { return c.Team.Manifest.Condition == baseline }) {
		return nil, 0, &usageError{command: "troupe run", err: fmt.Errorf("--baseline %q is none of the manifests' conditions", baseline)}
	}
	v, err := decide.VarianceFromRates(0.5, 0.5)
	if err != nil {
		return nil, 0, err
	}
	if opts.pilot != "" {
		if v, err = pilotVariance(stderr, opts.pilot, baseline); err != nil {
			return nil, 0, fmt.Errorf("--pilot %s: %w", opts.pilot, err)
		}
	}
	fixed, err := decide.PlanRounds(v, decide.Goal{Delta: opts.delta, Alpha: opts.alpha, Power: opts.power, Tasks: tasks, Scope: decide.ScopeTasks})
	if err != nil {
		return nil, 0, fmt.Errorf("--until-decided: the fixed design: %w", err)
	}
	rounds := cmp.Or(opts.maxAttempts, 2*fixed.Attempts)
	p := decide.Params{Alpha: opts.alpha, Delta: opts.delta, MaxRounds: rounds, FixedRounds: fixed.Attempts, Futility: 1 - opts.power, PriorVariance: v.Total()}
	if err := p.Validate(); err != nil {
		return nil, 0, &usageError{command: "troupe run", err: fmt.Errorf("--until-decided: %w", err)}
	}
	return &job.Sequential{Baseline: baseline, Params: p}, rounds, nil
}

// pilotVariance is the largest paired variance of a pilot job's
// conditions against baseline, as troupe plan measures it.
func pilotVariance(stderr io.Writer, dir, baseline string) (decide.Variance, error) {
	inputs, base, _, _, err := pilotInputs(stderr, []string{dir}, baseline)
	if err != nil {
		return decide.Variance{}, err
	}
	var v decide.Variance
	var errs []error
	for _, in := range inputs {
		if in.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", in.name, in.err))
		} else if in.variance.Total() > v.Total() {
			v = in.variance
		}
	}
	if v.Total() <= 0 {
		return v, fmt.Errorf("no condition of the pilot has a paired variance against %s: %w", base, errors.Join(errs...))
	}
	return v, nil
}

// printDecisions says what a sequential job decided, when, and what it
// saved against the fixed design.
func printDecisions(w io.Writer, rec *decide.JobRecord) {
	fmt.Fprintf(w, "decisions against %s (%s, α %.2f, ±%.2f; anytime-valid: %s):\n", rec.Baseline, rec.Method, rec.Params.Alpha, rec.Params.Delta, rec.Citation)
	for _, name := range slices.Sorted(maps.Keys(rec.Conditions)) {
		d := rec.Conditions[name].Decision
		when := fmt.Sprintf("at round %d", d.Round)
		if d.Verdict == decide.Undecided {
			when = fmt.Sprintf("after %d of at most %d rounds", d.Rounds, rec.Params.MaxRounds)
		}
		fmt.Fprintf(w, "  %-20s %s %s; difference in (%+.2f, %+.2f)\n", name, strings.ReplaceAll(string(d.Verdict), "_", " "), when, d.Interval.Low, d.Interval.High)
	}
	if rec.FixedDesignTrials > 0 {
		fmt.Fprintf(w, "  %d trials run; the fixed design (%d rounds at the planned power) runs %d\n", rec.TrialsRun, rec.Params.FixedRounds, rec.FixedDesignTrials)
	}
}
