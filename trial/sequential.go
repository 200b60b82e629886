package trial

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/trial/outcome"
)

// Sequential makes a job decide as it goes (troupe run --until-decided):
// it runs in rounds, round r being attempt r of every task, for the
// baseline and each condition not yet decided; after each round an
// anytime-valid test of each condition against the baseline (package
// decide) says better, worse, within ±Delta, or not yet, and a decided
// condition is not scheduled again. The job's Attempts bound the rounds.
type Sequential struct {
	// Baseline is the condition the others are tested against.
	Baseline string
	// Params are every test's settings; MaxRounds is the job's Attempts.
	Params decide.Params
}

// openSequential restores the job's tests from its folder, or starts them.
// A resumed job must keep its baseline and settings: its earlier looks
// were made with them.
func (j *job) openSequential() (*decide.JobRecord, error) {
	seq := j.spec.Sequential
	rec, err := decide.ReadJob(j.spec.Dir)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if rec.Baseline != seq.Baseline || rec.Params != seq.Params {
			return nil, fmt.Errorf("job %s decides sequentially against %s with %+v; this run asks %s with %+v: a sequential job goes on with the settings it began with (or use another --out)",
				j.spec.Dir, rec.Baseline, rec.Params, seq.Baseline, seq.Params)
		}
	} else {
		rec = &decide.JobRecord{Method: decide.Method, Citation: decide.Citation, Baseline: seq.Baseline, Params: seq.Params, Conditions: map[string]*decide.ConditionRecord{}}
	}
	found := false
	for _, c := range j.spec.Conditions {
		name := c.Team.Manifest.Condition
		if name == seq.Baseline {
			found = true
			continue
		}
		if rec.Conditions[name] != nil {
			continue
		}
		t, err := decide.NewTest(seq.Params)
		if err != nil {
			return nil, fmt.Errorf("the sequential test: %w", err)
		}
		rec.Conditions[name] = &decide.ConditionRecord{Test: t, Decision: t.Decision()}
	}
	if !found {
		return nil, fmt.Errorf("the baseline %q is none of the job's conditions", seq.Baseline)
	}
	if len(rec.Conditions) == 0 {
		return nil, errors.New("a sequential job needs a condition besides its baseline")
	}
	if seq.Params.FixedRounds > 0 {
		rec.FixedDesignTrials = (len(rec.Conditions) + 1) * len(j.spec.Tasks) * seq.Params.FixedRounds
	}
	return rec, nil
}

// runRounds runs a sequential job's trials round by round, looking after
// each round that finished. A round already looked at (a resumed job) is
// not run again, whatever it lacks: its data were used.
func (j *job) runRounds(ctx context.Context, todo []planned) error {
	rec, err := j.openSequential()
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.res.Sequential = rec
	j.mu.Unlock()
	base := j.spec.Sequential.Baseline
	for r := 1; r <= j.spec.Attempts && ctx.Err() == nil; r++ {
		// The conditions whose tests need this round, and the baseline
		// with them.
		need := map[string]bool{}
		for name, c := range rec.Conditions {
			if !c.Test.Ended() && c.Test.Rounds() < r {
				need[name] = true
			}
		}
		if len(need) == 0 {
			continue
		}
		need[base] = true
		g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
		g.SetLimit(j.spec.Concurrency)
		for _, p := range todo {
			if p.attempt != r || !need[p.cond.Team.Manifest.Condition] {
				continue
			}
			if ctx.Err() != nil || gctx.Err() != nil {
				break
			}
			g.Go(func() error {
				if ctx.Err() != nil || gctx.Err() != nil {
					return nil
				}
				return j.runTrial(ctx, p)
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			break // the round is not complete: it is looked at when the job resumes
		}
		if err := j.look(rec, r, need); err != nil {
			return err
		}
	}
	j.settleSequential(rec, todo)
	return nil
}

// look feeds round r to the tests that need it and writes where they
// stand.
func (j *job) look(rec *decide.JobRecord, r int, need map[string]bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(rec.Conditions)) {
		c := rec.Conditions[name]
		if !need[name] {
			continue
		}
		d, err := c.Test.Add(r, j.roundPairs(name, r))
		if err != nil {
			return fmt.Errorf("condition %s: %w", name, err)
		}
		c.Decision = d
		if d.Verdict != decide.Undecided && c.DecidedAt == nil {
			now := time.Now()
			c.DecidedAt = &now
			j.log.Info("decided", "condition", name, "verdict", d.Verdict, "round", r, "low", d.Interval.Low, "high", d.Interval.High)
		}
	}
	rec.Rounds = r
	return writeJSON(filepath.Join(j.spec.Dir, decide.JobFile), rec)
}

// roundPairs are a condition's and the baseline's results of attempt r,
// one pair per task that both scored. The caller holds j.mu.
func (j *job) roundPairs(condition string, r int) decide.Pairs {
	var p decide.Pairs
	for _, t := range j.spec.Tasks {
		this := j.res.Trials[TrialName(t.Name, condition, r)]
		that := j.res.Trials[TrialName(t.Name, j.spec.Sequential.Baseline, r)]
		if this.Scored() && that.Scored() {
			p.Add(this == outcome.Passed, that == outcome.Passed)
		}
	}
	return p
}

// settleSequential counts what the job ran and what its decisions spared,
// and writes the record a last time.
func (j *job) settleSequential(rec *decide.JobRecord, todo []planned) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ended := func(name string) bool {
		if c := rec.Conditions[name]; c != nil {
			return c.Test.Ended()
		}
		for _, c := range rec.Conditions { // the baseline: once every test has
			if !c.Test.Ended() {
				return false
			}
		}
		return true
	}
	notRun := 0
	for _, p := range todo {
		if _, ran := j.res.Trials[p.name]; !ran && ended(p.cond.Team.Manifest.Condition) {
			notRun++
		}
	}
	rec.TrialsNotRun = notRun
	j.res.Stats.Pending -= notRun // never to run
	rec.TrialsRun = len(j.res.Trials)
	if err := writeJSON(filepath.Join(j.spec.Dir, decide.JobFile), rec); err != nil {
		j.log.Error("write "+decide.JobFile, "err", err.Error())
	}
}
