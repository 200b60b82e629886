package job

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/troupebench/troupe/internal/atomicfile"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// Run plans a job (NewPlan) and runs it (Plan.Run).
func Run(ctx context.Context, env *trial.Env, spec Spec, progress Progress) (*Result, error) {
	p, err := NewPlan(spec)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx, env, progress)
}

// Run runs the plan's trials with bounded concurrency and writes the job
// folder. Running it again on the same folder resumes: kept trials are not
// rerun (Resume); a changed manifest, task or stack is refused. Cancelling
// ctx stops launching, cancels running trials (they still sweep and
// remove their containers) and writes what finished. The error is the
// job's: a trial's own failure is in its result.
func (p *Plan) Run(ctx context.Context, env *trial.Env, progress Progress) (*Result, error) {
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("job folder: %w", err)
	}
	unlock, err := lockFolder(p.Dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// The endpoints first: a job refused before any trial runs writes no
	// lock that would refuse its corrected inputs next time.
	if err := p.CheckEndpoints(ctx, env.Gateway); err != nil {
		return nil, err
	}
	if err := checkLock(p, env.Version, env.Limits.Multiplier); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(p.Dir, trialdir.JobLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("job log: %w", err)
	}
	defer logFile.Close()
	r := newRunner(env, p, slog.New(slog.NewTextHandler(logFile, nil)), progress)
	// Harbor keeps a job's id across its runs, as its trials name it.
	if id := readJobUUID(p.Dir); id != "" {
		r.res.ID = id
	}
	if err := atomicfile.WriteJSON(filepath.Join(p.Dir, trialdir.JobConfig), r.config()); err != nil {
		return nil, err
	}
	todo, err := r.resume()
	if err != nil {
		return nil, err
	}
	err = r.runRounds(ctx, todo)
	if e, ok := env.Runtime.(jobEnder); ok {
		if eerr := e.EndJob(ctx, env.JobID); eerr != nil {
			r.log.Error("cleanup", "err", eerr.Error())
		}
	}
	r.finish(ctx)
	return r.res, err
}

// jobEnder is a backend that holds something for a job's trials (Docker's
// job network; a pod per trial holds nothing shared): EndJob lets go of it
// once they are done.
type jobEnder interface {
	EndJob(ctx context.Context, job string) error
}

// runner is one run of a plan.
type runner struct {
	env      *trial.Env
	plan     *Plan
	log      *slog.Logger
	progress Progress
	// runOne runs a trial of the plan (runTrial): the seam the scheduling
	// loop's tests replace.
	runOne func(context.Context, *PlanTrial) error

	mu      sync.Mutex // guards res and the progress callbacks
	res     *Result
	writeMu sync.Mutex // orders the writes of result.json
}

func newRunner(env *trial.Env, p *Plan, log *slog.Logger, progress Progress) *runner {
	r := &runner{env: env, plan: p, log: log, progress: progress.orNothing()}
	r.runOne = r.runTrial
	r.res = &Result{ID: trialdir.NewUUID(), JobID: env.JobID, StartedAt: time.Now(), Total: len(p.Trials), Conditions: map[string]*ConditionStats{}, Trials: map[string]outcome.Outcome{}}
	for _, c := range p.spec.Conditions {
		r.res.Conditions[c.Team.Manifest.Condition] = &ConditionStats{ManifestHash: c.Team.Manifest.Hash()}
	}
	return r
}

// resume reads what the folder holds of each trial (Plan.Resume), counts
// the kept ones, moves the folders of those redone aside, says that the
// job started, and returns the trials to run.
func (r *runner) resume() ([]*PlanTrial, error) {
	p := r.plan
	p.Resume()
	var todo []*PlanTrial
	for _, t := range p.Trials {
		switch t.State {
		case Kept:
			r.count(t, t.kept)
			continue
		case Redo:
			if err := r.supersede(t.Name, t.Why); err != nil {
				return nil, err
			}
		}
		todo = append(todo, t)
	}
	r.res.Stats.Pending = len(todo)
	kept := len(p.Trials) - len(todo)
	r.log.Info("job start", "dir", p.Dir, "trials", len(p.Trials), "kept", kept, "concurrency", p.Concurrency)
	r.progress.Job(Event{Time: time.Now(), Type: EventStarted, Dir: p.Dir, Total: len(p.Trials), Kept: kept})
	r.write()
	return todo, nil
}

// finish writes the job's end: finished unless it was cancelled.
func (r *runner) finish(ctx context.Context) {
	now := time.Now()
	r.mu.Lock()
	if ctx.Err() == nil {
		r.res.FinishedAt = &now
	}
	r.mu.Unlock()
	r.write()
	r.log.Info("job end", "interrupted", ctx.Err() != nil)
	r.progress.Job(Event{Time: now, Type: EventFinished, Dir: r.plan.Dir, Total: len(r.plan.Trials), Kept: r.plan.Kept()})
}

// runTrial runs one planned trial, again while it ends unscored_infra and
// retries are left, after a backoff.
func (r *runner) runTrial(ctx context.Context, p *PlanTrial) error {
	r.mu.Lock()
	r.res.Stats.Pending--
	r.res.Stats.Running++
	r.mu.Unlock()
	r.write() // a reader of result.json sees the trial running
	defer func() {
		r.mu.Lock()
		r.res.Stats.Running--
		r.mu.Unlock()
		r.write()
	}()
	emit := func(e trial.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.progress.Trial(e)
	}
	for try := 0; ; try++ {
		spec := trial.Spec{Name: p.Name, Dir: filepath.Join(r.plan.Dir, p.Name), Team: p.cond.Team, ManifestPath: p.cond.Path, Task: p.task, Attempt: p.Attempt, Oracle: p.cond.Oracle, Stacks: p.cond.Stacks, Replay: r.plan.spec.Replay, JobUUID: r.res.ID}
		res, err := trial.Run(ctx, r.env, spec, emit)
		if err != nil {
			return err // the result could not be written: the disk is the problem
		}
		if res.Outcome != outcome.UnscoredInfra || try >= r.plan.Retries || ctx.Err() != nil {
			r.count(p, res)
			return nil
		}
		r.spent(p, res) // the retried run is superseded; what it cost was paid
		wait := min(time.Duration(1<<try)*time.Second, time.Minute)
		r.log.Info("retrying an infrastructure failure", "trial", p.Name, "retry", try+1, "wait", wait.String(), "error", res.ExceptionInfo)
		if err := r.supersede(p.Name, "infra-"+strconv.Itoa(try+1)); err != nil {
			return err
		}
		r.mu.Lock()
		r.res.Stats.Retries++
		r.progress.Job(Event{Time: time.Now(), Type: EventRetry, Dir: r.plan.Dir, Trial: p.Name, Attempt: try + 1, Error: exceptionMessage(res)})
		r.mu.Unlock()
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			r.count(p, res) // its last run stands, to be redone on resume
			return nil
		}
	}
}

func exceptionMessage(res *trialdir.TrialResult) string {
	if res.ExceptionInfo == nil {
		return ""
	}
	return res.ExceptionInfo.ExceptionMessage
}

// supersede moves a trial folder that will be redone aside, so that no
// earlier run's evidence is lost.
func (r *runner) supersede(name, why string) error {
	dir := filepath.Join(r.plan.Dir, trialdir.Superseded)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	to := filepath.Join(dir, fmt.Sprintf("%s.%s.%s", name, why, time.Now().UTC().Format("20060102T150405.000")))
	if err := os.Rename(filepath.Join(r.plan.Dir, name), to); err != nil {
		return fmt.Errorf("keep the earlier run of %s: %w", name, err)
	}
	return nil
}
