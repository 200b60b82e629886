package job

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// schedule says which trials a job runs, round by round. A fixed job is
// one round of every trial to run; a sequential job's round r is attempt r
// of the conditions its tests still need, looked at once it completed.
type schedule interface {
	// round returns round r's trials, none when the round needs no run;
	// more is false past the last round.
	round(r int) (trials []*PlanTrial, more bool)
	// completed is told that round r ran to its end, not cancelled.
	completed(r int) error
	// end is told that the rounds are over, cancelled or not, without
	// error.
	end()
}

// runRounds runs the trials to run, todo, as the job's schedule has them:
// every trial at once for a fixed job, in rounds for a sequential one.
func (r *runner) runRounds(ctx context.Context, todo []*PlanTrial) error {
	var s schedule = fixed(todo)
	if r.plan.Sequential != nil {
		seq, err := r.openSequential(todo)
		if err != nil {
			return err
		}
		s = seq
	}
	return r.walk(ctx, s)
}

// walk is the job's one scheduling loop: round after round, launch the
// round's trials, wait for them, and tell the schedule the round
// completed. A cancelled ctx ends it after the round that runs (that round
// is not complete, and is looked at when the job resumes); an error of a
// trial (its result could not be written) ends it at once.
func (r *runner) walk(ctx context.Context, s schedule) error {
	for n := 1; ctx.Err() == nil; n++ {
		trials, more := s.round(n)
		if !more {
			break
		}
		if err := r.launch(ctx, trials); err != nil {
			return err
		}
		if ctx.Err() != nil {
			break
		}
		if err := s.completed(n); err != nil {
			return err
		}
	}
	s.end()
	return nil
}

// launch runs trials at most the plan's concurrency at once, and waits for
// those it started. It stops launching when ctx ends (the trials not
// started stay pending for a rerun) or when a trial's result cannot be
// written (a full disk): then gctx ends and ctx does not, so the running
// trials finish and clean up normally.
func (r *runner) launch(ctx context.Context, trials []*PlanTrial) error {
	g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	g.SetLimit(r.plan.Concurrency)
	for _, p := range trials {
		if ctx.Err() != nil || gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if ctx.Err() != nil || gctx.Err() != nil {
				return nil // never started: it stays pending for a rerun
			}
			return r.runOne(ctx, p)
		})
	}
	return g.Wait()
}

// fixed is a fixed job's schedule: one round of every trial to run.
type fixed []*PlanTrial

func (f fixed) round(r int) ([]*PlanTrial, bool) { return f, r == 1 }
func (fixed) completed(int) error                { return nil }
func (fixed) end()                               {}
