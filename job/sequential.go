package job

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/internal/atomicfile"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// Sequential makes a job decide as it goes (troupe run --until-decided):
// it runs in rounds, round r being attempt r of every task, for the
// baseline and each condition not yet decided; after each round an
// anytime-valid test of each condition against the baseline (package
// decide) says better, worse, within ±Delta, or not yet, and a decided
// condition is not scheduled again. The job's Attempts bound the rounds.
type Sequential struct {
	// Baseline is the condition the others are tested against.
	Baseline string `json:"baseline"`
	// Params are every test's settings; MaxRounds is the job's Attempts.
	Params decide.Params `json:"params"`
}

// sequential is a sequential job's schedule: its tests, and the
// conditions the round that runs needs.
type sequential struct {
	r    *runner
	rec  *decide.JobRecord
	todo []*PlanTrial
	need map[string]bool
}

// openSequential restores the job's tests from its folder, or starts them.
// A resumed job must keep its baseline and settings: its earlier looks
// were made with them.
func (r *runner) openSequential(todo []*PlanTrial) (*sequential, error) {
	spec := r.plan.spec
	seq := spec.Sequential
	rec, err := decide.ReadJob(spec.Dir)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if rec.Baseline != seq.Baseline || rec.Params != seq.Params {
			return nil, fmt.Errorf("job %s decides sequentially against %s with %+v; this run asks %s with %+v: a sequential job goes on with the settings it began with (or use another --out)",
				spec.Dir, rec.Baseline, rec.Params, seq.Baseline, seq.Params)
		}
	} else {
		rec = &decide.JobRecord{Method: decide.Method, Citation: decide.Citation, Baseline: seq.Baseline, Params: seq.Params, Conditions: map[string]*decide.ConditionRecord{}}
	}
	found := false
	for _, c := range spec.Conditions {
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
		rec.FixedDesignTrials = (len(rec.Conditions) + 1) * len(spec.Tasks) * seq.Params.FixedRounds
	}
	r.mu.Lock()
	r.res.Sequential = rec
	r.mu.Unlock()
	return &sequential{r: r, rec: rec, todo: todo}, nil
}

// round is attempt r of the conditions whose tests need it, and of the
// baseline with them. A round already looked at (a resumed job) is not
// run again, whatever it lacks: its data were used.
func (s *sequential) round(r int) ([]*PlanTrial, bool) {
	if r > s.r.plan.Attempts {
		return nil, false
	}
	s.need = map[string]bool{}
	for name, c := range s.rec.Conditions {
		if !c.Test.Ended() && c.Test.Rounds() < r {
			s.need[name] = true
		}
	}
	if len(s.need) == 0 {
		return nil, true
	}
	s.need[s.r.plan.Sequential.Baseline] = true
	var trials []*PlanTrial
	for _, p := range s.todo {
		if p.Attempt == r && s.need[p.Condition] {
			trials = append(trials, p)
		}
	}
	return trials, true
}

// completed feeds round r to the tests that need it and writes where they
// stand.
func (s *sequential) completed(r int) error {
	if len(s.need) == 0 {
		return nil // nothing ran, nothing to look at
	}
	j := s.r
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(s.rec.Conditions)) {
		c := s.rec.Conditions[name]
		if !s.need[name] {
			continue
		}
		d, err := c.Test.Add(r, s.roundPairs(name, r))
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
	s.rec.Rounds = r
	return atomicfile.WriteJSON(filepath.Join(j.plan.Dir, decide.JobFile), s.rec)
}

// roundPairs are a condition's and the baseline's results of attempt r,
// one pair per task that both scored. The caller holds the runner's mu.
func (s *sequential) roundPairs(condition string, r int) decide.Pairs {
	var p decide.Pairs
	for _, t := range s.r.plan.spec.Tasks {
		this := s.r.res.Trials[trialdir.TrialName(t.Name, condition, r)]
		that := s.r.res.Trials[trialdir.TrialName(t.Name, s.r.plan.Sequential.Baseline, r)]
		if this.Scored() && that.Scored() {
			p.Add(this == outcome.Passed, that == outcome.Passed)
		}
	}
	return p
}

// end counts what the job ran and what its decisions spared, and writes
// the record a last time.
func (s *sequential) end() {
	j := s.r
	j.mu.Lock()
	defer j.mu.Unlock()
	ended := func(name string) bool {
		if c := s.rec.Conditions[name]; c != nil {
			return c.Test.Ended()
		}
		for _, c := range s.rec.Conditions { // the baseline: once every test has
			if !c.Test.Ended() {
				return false
			}
		}
		return true
	}
	notRun := 0
	for _, p := range s.todo {
		if _, ran := j.res.Trials[p.Name]; !ran && ended(p.Condition) {
			notRun++
		}
	}
	s.rec.TrialsNotRun = notRun
	j.res.Stats.Pending -= notRun // never to run
	s.rec.TrialsRun = len(j.res.Trials)
	if err := atomicfile.WriteJSON(filepath.Join(j.plan.Dir, decide.JobFile), s.rec); err != nil {
		j.log.Error("write "+decide.JobFile, "err", err.Error())
	}
}
