package trial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
	"golang.org/x/sync/errgroup"
)

// Condition is one manifest of a job, verified.
type Condition struct {
	Path string
	Team *manifest.Team
	// Oracle runs each task's solution/solve.sh instead of the team
	// (OracleCondition).
	Oracle bool
	// Stacks are the stacks its agents' harnesses may name, beside the
	// built-in reference agent.
	Stacks stack.Set
}

// JobSpec is what `troupe run` was asked to do.
type JobSpec struct {
	Dir         string
	Conditions  []Condition
	Tasks       []*task.Task
	Attempts    int
	Concurrency int
	// Retries is how many times an unscored_infra trial is run again.
	Retries int
	// Command is the command line, recorded in config.json.
	Command []string
	// Replay makes every trial a replay of a recorded one (troupe replay).
	Replay *Replay
	// Sequential runs the job in rounds until its conditions are decided
	// (troupe run --until-decided); Attempts bounds the rounds.
	Sequential *Sequential
}

// Job event types, besides the trials' own.
const (
	EventJobStarted  = "job_started"
	EventJobFinished = "job_finished"
	EventRetry       = "trial_retry"
)

// JobEvent is a job-level event: the plan at the start, the totals at the
// end. Trials' events come as Event.
type JobEvent struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Dir     string    `json:"dir"`
	Total   int       `json:"n_total_trials"`
	Kept    int       `json:"n_kept_trials"`
	Trial   string    `json:"trial,omitempty"`
	Attempt int       `json:"retry,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// Progress receives a job's events; both are called from several
// goroutines, never at once.
type Progress struct {
	Trial func(Event)
	Job   func(JobEvent)
}

// lockFile pins a job's inputs: a resumed job must run the same manifests
// and tasks.
type lockFile struct {
	Version string `json:"troupe_version"`
	// TimeoutMultiplier scales every limit: trials under other limits are
	// not comparable either.
	TimeoutMultiplier float64       `json:"timeout_multiplier,omitempty"`
	Conditions        []lockedInput `json:"conditions"`
	Tasks             []lockedInput `json:"tasks"`
	// Stacks are the agent programs, by the digest of their files, command
	// and environment: a result says which agent build produced it.
	Stacks []lockedInput `json:"stacks,omitempty"`
}

type lockedInput struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Digest string `json:"digest"`
}

// ConditionStats counts one condition's trials in the job's result.json.
// Scored and pass rate are outcome's: the same as troupe compare's.
type ConditionStats struct {
	ManifestHash string `json:"manifest_sha256"`
	Trials       int    `json:"n_trials"`
	outcome.Tally
	Scored int `json:"n_scored"`
	// PassRate is passed over scored; null while nothing is scored.
	PassRate *float64 `json:"pass_rate"`
	// CostUSD is what every run of the condition's trials spent, infra
	// failures and runs redone after them included.
	CostUSD float64 `json:"cost_usd"`
}

// JobStats are the job's running totals.
type JobStats struct {
	Completed    int     `json:"n_completed_trials"`
	Errored      int     `json:"n_errored_trials"`
	Running      int     `json:"n_running_trials"`
	Pending      int     `json:"n_pending_trials"`
	Cancelled    int     `json:"n_cancelled_trials"`
	Retries      int     `json:"n_retries"`
	InputTokens  int64   `json:"n_input_tokens"`
	CachedTokens int64   `json:"n_cache_tokens"`
	OutputTokens int64   `json:"n_output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// JobResult is the job's result.json, rewritten as trials finish.
type JobResult struct {
	ID         string                     `json:"id"`
	StartedAt  time.Time                  `json:"started_at"`
	UpdatedAt  time.Time                  `json:"updated_at"`
	FinishedAt *time.Time                 `json:"finished_at"`
	Total      int                        `json:"n_total_trials"`
	Stats      JobStats                   `json:"stats"`
	Conditions map[string]*ConditionStats `json:"conditions"`
	// Trials maps each trial folder to its outcome.
	Trials map[string]outcome.Outcome `json:"trials"`
	// Sequential is a sequential job's tests and decisions
	// (sequential.go); nil for a fixed design.
	Sequential *decide.JobRecord `json:"sequential,omitempty"`
}

// planned is one trial of the job.
type planned struct {
	name    string
	cond    Condition
	task    *task.Task
	attempt int
}

// RunJob runs manifests × tasks × attempts with bounded concurrency and
// writes the job folder. Running it again on the same folder resumes: kept
// trials are not rerun; a changed manifest or task is refused. Cancelling
// ctx stops launching, cancels running trials (they still sweep and remove
// their containers) and writes what finished.
func RunJob(ctx context.Context, env *Env, spec JobSpec, progress Progress) (*JobResult, error) {
	if progress.Trial == nil {
		progress.Trial = func(Event) {}
	}
	if progress.Job == nil {
		progress.Job = func(JobEvent) {}
	}
	if spec.Attempts < 1 {
		spec.Attempts = 1
	}
	if spec.Concurrency < 1 {
		spec.Concurrency = 1
	}
	plan, err := planJob(spec)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("job folder: %w", err)
	}
	unlock, err := lockFolder(spec.Dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// The endpoints first: a job refused before any trial runs writes no
	// lock that would refuse its corrected inputs next time.
	if err := checkEndpoints(env.Gateway, spec.Conditions); err != nil {
		return nil, err
	}
	if err := checkLock(spec, env.Version, env.Limits.Multiplier); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(spec.Dir, "job.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("job log: %w", err)
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, nil))

	j := &job{env: env, spec: spec, log: log, progress: progress}
	j.res = &JobResult{ID: env.JobID, StartedAt: time.Now(), Total: len(plan), Conditions: map[string]*ConditionStats{}, Trials: map[string]outcome.Outcome{}}
	for _, c := range spec.Conditions {
		j.res.Conditions[c.Team.Manifest.Condition] = &ConditionStats{ManifestHash: c.Team.Manifest.Hash()}
	}
	if err := writeJSON(filepath.Join(spec.Dir, "config.json"), j.config()); err != nil {
		return nil, err
	}

	// Kept trials first: their results count and they are not rerun.
	var todo []planned
	for _, p := range plan {
		dir := filepath.Join(spec.Dir, p.name)
		res, readErr := ReadResult(filepath.Join(dir, trialdir.Result))
		finished := readErr == nil && res.Finished()
		// A result of other inputs (its lock.json removed by hand) is not
		// kept: it would be counted as a result of these.
		if finished && res.ManifestHash == p.cond.Team.Manifest.Hash() && res.TaskChecksum == p.task.Digest {
			j.count(p, res)
			continue
		}
		if _, err := os.Stat(dir); err == nil {
			why := "unfinished"
			if finished {
				why = "other-inputs"
			}
			if err := j.supersede(p.name, why); err != nil {
				return nil, err
			}
		}
		todo = append(todo, p)
	}
	j.res.Stats.Pending = len(todo)
	kept := len(plan) - len(todo)
	log.Info("job start", "dir", spec.Dir, "trials", len(plan), "kept", kept, "concurrency", spec.Concurrency)
	progress.Job(JobEvent{Time: time.Now(), Type: EventJobStarted, Dir: spec.Dir, Total: len(plan), Kept: kept})
	j.write()

	// A trial whose result cannot be written (a full disk) stops the
	// launching of more: gctx ends, ctx does not, so the running trials
	// finish and clean up normally.
	if spec.Sequential != nil {
		err = j.runRounds(ctx, todo)
	} else {
		g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
		g.SetLimit(spec.Concurrency)
		for _, p := range todo {
			if ctx.Err() != nil || gctx.Err() != nil {
				break
			}
			g.Go(func() error {
				if ctx.Err() != nil || gctx.Err() != nil {
					return nil // never started: it stays pending for a rerun
				}
				return j.runTrial(ctx, p)
			})
		}
		err = g.Wait()
	}
	if eerr := env.Runtime.EndJob(ctx, env.JobID); eerr != nil {
		log.Error("cleanup", "err", eerr.Error())
	}
	now := time.Now()
	j.mu.Lock()
	if ctx.Err() == nil {
		j.res.FinishedAt = &now
	}
	j.mu.Unlock()
	j.write()
	log.Info("job end", "interrupted", ctx.Err() != nil)
	progress.Job(JobEvent{Time: now, Type: EventJobFinished, Dir: spec.Dir, Total: len(plan), Kept: kept})
	return j.res, err
}

// Preflight checks a job as RunJob does before any container starts (the
// plan, the stacks and their digests, every endpoint on the gateway) and
// returns how many trials it holds; nothing is started or written.
func Preflight(env *Env, spec JobSpec) (int, error) {
	if spec.Attempts < 1 {
		spec.Attempts = 1
	}
	plan, err := planJob(spec)
	if err != nil {
		return 0, err
	}
	if err := checkEndpoints(env.Gateway, spec.Conditions); err != nil {
		return 0, err
	}
	return len(plan), nil
}

type job struct {
	env      *Env
	spec     JobSpec
	log      *slog.Logger
	progress Progress

	mu      sync.Mutex // guards res and the progress callbacks
	res     *JobResult
	writeMu sync.Mutex // orders the writes of result.json
}

// runTrial runs one planned trial, again while it ends unscored_infra and
// retries are left.
func (j *job) runTrial(ctx context.Context, p planned) error {
	j.mu.Lock()
	j.res.Stats.Pending--
	j.res.Stats.Running++
	j.mu.Unlock()
	j.write() // a reader of result.json sees the trial running
	defer func() {
		j.mu.Lock()
		j.res.Stats.Running--
		j.mu.Unlock()
		j.write()
	}()
	emit := func(e Event) {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.progress.Trial(e)
	}
	for try := 0; ; try++ {
		spec := Spec{Name: p.name, Dir: filepath.Join(j.spec.Dir, p.name), Team: p.cond.Team, ManifestPath: p.cond.Path, Task: p.task, Attempt: p.attempt, Oracle: p.cond.Oracle, Stacks: p.cond.Stacks, Replay: j.spec.Replay}
		res, err := Run(ctx, j.env, spec, emit)
		if err != nil {
			return err // the result could not be written: the disk is the problem
		}
		if res.Outcome != outcome.UnscoredInfra || try >= j.spec.Retries || ctx.Err() != nil {
			j.count(p, res)
			return nil
		}
		j.spent(p, res) // the retried run is superseded; what it cost was paid
		wait := min(time.Duration(1<<try)*time.Second, time.Minute)
		j.log.Info("retrying an infrastructure failure", "trial", p.name, "retry", try+1, "wait", wait.String(), "error", res.ExceptionInfo)
		if err := j.supersede(p.name, "infra-"+strconv.Itoa(try+1)); err != nil {
			return err
		}
		j.mu.Lock()
		j.res.Stats.Retries++
		j.progress.Job(JobEvent{Time: time.Now(), Type: EventRetry, Dir: j.spec.Dir, Trial: p.name, Attempt: try + 1, Error: exceptionMessage(res)})
		j.mu.Unlock()
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			j.count(p, res) // its last run stands, to be redone on resume
			return nil
		}
	}
}

func exceptionMessage(res *Result) string {
	if res.ExceptionInfo == nil {
		return ""
	}
	return res.ExceptionInfo.ExceptionMessage
}

// count adds a trial's result to the job's totals.
func (j *job) count(p planned, res *Result) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := &j.res.Stats
	c := j.res.Conditions[p.cond.Team.Manifest.Condition]
	c.Trials++
	c.Add(res.Outcome)
	c.Scored = c.Tally.Scored()
	if rate := c.Tally.PassRate(); !math.IsNaN(rate) {
		c.PassRate = &rate
	}
	// Harbor's counts: completed trials have a verdict of the verifier;
	// errored ones have an exception (verifier_error among them).
	switch res.Outcome {
	case outcome.Passed, outcome.Failed:
		s.Completed++
	case outcome.Cancelled:
		s.Cancelled++
	default:
		s.Errored++
	}
	j.res.Trials[p.name] = res.Outcome
	j.addSpend(c, res)
}

// spent counts what a run that is redone cost: it is paid for, though its
// outcome is replaced by the retry's.
func (j *job) spent(p planned, res *Result) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.addSpend(j.res.Conditions[p.cond.Team.Manifest.Condition], res)
}

// addSpend adds a run's tokens and cost to the job's and the condition's
// totals; j.mu is held.
func (j *job) addSpend(c *ConditionStats, res *Result) {
	s := &j.res.Stats
	c.CostUSD += res.AgentResult.CostUSD
	s.InputTokens += res.AgentResult.NInputTokens
	s.CachedTokens += res.AgentResult.NCacheTokens
	s.OutputTokens += res.AgentResult.NOutputTokens
	s.CostUSD += res.AgentResult.CostUSD
}

// write rewrites the job's result.json.
func (j *job) write() {
	// One writer at a time, each with a snapshot taken under its turn: the
	// file never goes back to an older snapshot.
	j.writeMu.Lock()
	defer j.writeMu.Unlock()
	j.mu.Lock()
	j.res.UpdatedAt = time.Now()
	data, err := json.Marshal(j.res) // a snapshot, taken under the lock
	j.mu.Unlock()
	if err == nil {
		var snapshot JobResult
		if err = json.Unmarshal(data, &snapshot); err == nil {
			err = writeJSON(filepath.Join(j.spec.Dir, "result.json"), &snapshot)
		}
	}
	if err != nil {
		j.log.Error("write the job's result.json", "err", err.Error())
	}
}

// supersede moves a trial folder that will be redone aside, so that no
// earlier run's evidence is lost.
func (j *job) supersede(name, why string) error {
	dir := filepath.Join(j.spec.Dir, ".superseded")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	to := filepath.Join(dir, fmt.Sprintf("%s.%s.%s", name, why, time.Now().UTC().Format("20060102T150405.000")))
	if err := os.Rename(filepath.Join(j.spec.Dir, name), to); err != nil {
		return fmt.Errorf("keep the earlier run of %s: %w", name, err)
	}
	return nil
}

func (j *job) config() any {
	var manifests, tasks []string
	for _, c := range j.spec.Conditions {
		manifests = append(manifests, c.Path)
	}
	for _, t := range j.spec.Tasks {
		tasks = append(tasks, t.Dir)
	}
	return map[string]any{
		"job_id": j.env.JobID, "command": j.spec.Command, "manifests": manifests, "tasks": tasks,
		"attempts": j.spec.Attempts, "concurrency": j.spec.Concurrency, "retries": j.spec.Retries,
		"timeout_multiplier": j.env.Limits.Multiplier, "troupe_version": j.env.Version,
	}
}

// TrialName is a trial's folder name in its job, <task>__<condition>__<attempt>:
// the one rule, for the job runner and the commands that find a trial.
func TrialName(task, condition string, attempt int) string {
	return fmt.Sprintf("%s__%s__%d", task, condition, attempt)
}

// planJob expands conditions × tasks × attempts, attempts outermost and
// conditions innermost, so that an interrupted job has spread its trials
// over every condition.
func planJob(spec JobSpec) ([]planned, error) {
	if len(spec.Conditions) == 0 {
		return nil, errors.New("no manifests")
	}
	if len(spec.Tasks) == 0 {
		return nil, errors.New("no tasks")
	}
	var errs []error
	for _, t := range spec.Tasks {
		if err := checkFolderName(t.Name); err != nil {
			errs = append(errs, fmt.Errorf("task %s: its folder name %w", t.Dir, err))
		}
	}
	for _, c := range spec.Conditions {
		if err := checkFolderName(c.Team.Manifest.Condition); err != nil {
			errs = append(errs, fmt.Errorf("%s: condition %w", c.Path, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	byName := map[string]Condition{}
	for _, c := range spec.Conditions {
		m := c.Team.Manifest
		if other, ok := byName[m.Condition]; ok && other.Team.Manifest.Hash() != m.Hash() {
			return nil, fmt.Errorf("%s and %s both name condition %q with different rosters: conditions name trial folders and must be unique", other.Path, c.Path, m.Condition)
		}
		// Every stack is resolved and its files checked against their
		// digests before any container starts.
		verified := map[string]bool{}
		for _, a := range c.Team.Agents {
			st, err := c.Stacks.Resolve(string(a.Harness))
			if err != nil {
				return nil, fmt.Errorf("%s: agent %s: %w", c.Path, a.ID, err)
			}
			if !verified[st.Name] {
				if _, err := st.Verify(); err != nil {
					return nil, fmt.Errorf("%s: agent %s: %w", c.Path, a.ID, err)
				}
				verified[st.Name] = true
			}
		}
		byName[m.Condition] = c
	}
	var plan []planned
	for attempt := 1; attempt <= spec.Attempts; attempt++ {
		for _, t := range spec.Tasks {
			for _, name := range slices.Sorted(maps.Keys(byName)) {
				trial := TrialName(t.Name, name, attempt)
				if len(trial)+len("-")+8 > maxChannelID {
					return nil, fmt.Errorf("trial %s: the name is too long for a relay channel (%d characters with its 9-character suffix): shorten the task's folder name or the condition", trial, maxChannelID)
				}
				plan = append(plan, planned{name: trial, cond: byName[name], task: t, attempt: attempt})
			}
		}
	}
	return plan, nil
}

// maxChannelID is the relay's limit on a channel id: the trial's name and
// "-" and 8 hex digits.
const maxChannelID = 128

// checkFolderName: conditions and tasks name trial folders and relay
// channels ("<task>__<condition>__<attempt>").
func checkFolderName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\"'`") || strings.IndexFunc(name, unicode.IsSpace) >= 0 {
		return fmt.Errorf("%q cannot name a trial folder and channel: use letters, digits, '.', '_' or '-', with no spaces, slashes or quotes", name)
	}
	return nil
}

// checkLock writes lock.json on a new job and, on a resumed one, refuses a
// manifest or task that changed since.
func checkLock(spec JobSpec, version string, multiplier float64) error {
	if multiplier <= 0 {
		multiplier = 1
	}
	lock := lockFile{Version: version, TimeoutMultiplier: multiplier}
	for _, c := range spec.Conditions {
		lock.Conditions = append(lock.Conditions, lockedInput{Name: c.Team.Manifest.Condition, Path: c.Path, Digest: c.Team.Manifest.Hash()})
	}
	for _, t := range spec.Tasks {
		lock.Tasks = append(lock.Tasks, lockedInput{Name: t.Name, Path: t.Dir, Digest: t.Digest})
	}
	usedBy := map[string][]string{} // stack → conditions
	for _, c := range spec.Conditions {
		for _, a := range c.Team.Agents {
			st, err := c.Stacks.Resolve(string(a.Harness))
			if err != nil || slices.Contains(usedBy[st.Name], c.Team.Manifest.Condition) {
				continue
			}
			if len(usedBy[st.Name]) == 0 {
				lock.Stacks = append(lock.Stacks, lockedInput{Name: st.Name, Path: st.Source, Digest: st.Digest()})
			}
			usedBy[st.Name] = append(usedBy[st.Name], c.Team.Manifest.Condition)
		}
	}
	path := filepath.Join(spec.Dir, "lock.json")
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return writeJSON(path, lock)
	case err != nil:
		return fmt.Errorf("lock file: %w", err)
	}
	var old lockFile
	if err := json.Unmarshal(data, &old); err != nil {
		return fmt.Errorf("%s is not a troupe lock file: %w", path, err)
	}
	var changed []string
	// An input that changed is refused only when the job holds results of
	// it; one that never produced a result (the run was stopped early, or
	// refused) is simply locked as it is now.
	compare := func(what string, was, now []lockedInput, hasResults func(string) bool) []lockedInput {
		merged := slices.Clone(was)
		for _, n := range now {
			i := slices.IndexFunc(was, func(w lockedInput) bool { return w.Name == n.Name })
			switch {
			case i < 0:
				merged = append(merged, n)
			case was[i].Digest == n.Digest:
			case hasResults(n.Name):
				changed = append(changed, fmt.Sprintf("%s %s changed: %s was %s when the job started, it is %s now (%s)", what, n.Name, was[i].Path, was[i].Digest, n.Digest, n.Path))
			default:
				merged[i] = n
			}
		}
		return merged
	}
	// Read only when something changed: it opens every trial's result.
	trials := sync.OnceValue(func() []string { return finishedTrialNames(spec.Dir) })
	if old.TimeoutMultiplier != 0 && old.TimeoutMultiplier != multiplier && len(trials()) > 0 {
		changed = append(changed, fmt.Sprintf("--timeout-multiplier was %g when the job started, it is %g now", old.TimeoutMultiplier, multiplier))
	}
	lock.Conditions = compare("condition", old.Conditions, lock.Conditions, func(name string) bool {
		return slices.ContainsFunc(trials(), func(t string) bool { return strings.Contains(t, "__"+name+"__") })
	})
	lock.Tasks = compare("task", old.Tasks, lock.Tasks, func(name string) bool {
		return slices.ContainsFunc(trials(), func(t string) bool { return strings.HasPrefix(t, name+"__") })
	})
	lock.Stacks = compare("stack", old.Stacks, lock.Stacks, func(name string) bool {
		return slices.ContainsFunc(trials(), func(t string) bool {
			return slices.ContainsFunc(usedBy[name], func(cond string) bool { return strings.Contains(t, "__"+cond+"__") })
		})
	})
	if len(changed) > 0 {
		return fmt.Errorf("%s holds a job whose inputs changed; results would not be comparable. Use another --out, or restore the inputs:\n  %s", spec.Dir, strings.Join(changed, "\n  "))
	}
	lock.Version = old.Version
	return writeJSON(path, lock)
}

// finishedTrialNames lists the trial folders of a job that hold a finished
// result.
func finishedTrialNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if res, err := ReadResult(filepath.Join(dir, e.Name(), trialdir.Result)); err == nil && res.Finished() {
			names = append(names, e.Name())
		}
	}
	return names
}

// lockFolder takes the job folder for this process: two runs writing one
// job would move each other's live trials aside and mix their files. The
// lock is the kernel's (flock), so a crashed run holds it no longer.
func lockFolder(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("job folder: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another troupe run is using the job folder %s: wait for it, stop it, or give this run another --out", dir)
		}
		return nil, fmt.Errorf("lock the job folder %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// checkEndpoints opens and closes a trial per condition on the gateway, so
// that an unconfigured endpoint, a missing price or a broken mock scenario
// is an error before any container starts.
func checkEndpoints(g *llm.Gateway, conds []Condition) error {
	var errs []error
	for _, c := range conds {
		if c.Oracle {
			continue // no model
		}
		var agents []llm.AgentSpec
		for _, a := range c.Team.Agents {
			agents = append(agents, llm.AgentSpec{ID: a.ID, Role: a.Role, Kind: string(a.Kind), Endpoint: a.Endpoint})
		}
		t, err := g.OpenTrial(llm.TrialSpec{ID: "pre-flight check of " + c.Team.Manifest.Condition, Agents: agents, Prices: c.Team.Manifest.Prices})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
			continue
		}
		t.Close(context.Background())
	}
	return errors.Join(errs...)
}
