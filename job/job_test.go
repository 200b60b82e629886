package job

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

func TestJobRetriesInfraFailuresAndResumes(t *testing.T) {
	env := testEnv(t)
	dir := filepath.Join(t.TempDir(), "job")
	spec := Spec{
		Dir:        dir,
		Conditions: []Condition{cond(t, "../examples/manifests/solo.yaml"), cond(t, testdata("manifests", "wrong.yaml"))},
		Tasks:      []*task.Task{loadTask(t, helloWorld), loadTask(t, testdata("tasks", "broken-dockerfile"))},
		Attempts:   1, Concurrency: 2, Retries: 1,
	}
	var mu sync.Mutex
	var jobEvents []Event
	finished := map[string]outcome.Outcome{}
	runningAtFirstStart := -1 // what result.json said when the first trial started
	progress := Progress{
		Trial: func(e trial.Event) {
			if e.Type == trial.EventStarted {
				var onDisk Result
				data, _ := os.ReadFile(filepath.Join(dir, "result.json"))
				json.Unmarshal(data, &onDisk)
				mu.Lock()
				if runningAtFirstStart < 0 {
					runningAtFirstStart = onDisk.Stats.Running
				}
				mu.Unlock()
			}
			if e.Type == trial.EventFinished {
				mu.Lock()
				finished[e.Trial] = e.Outcome
				mu.Unlock()
			}
		},
		Job: func(e Event) { jobEvents = append(jobEvents, e) },
	}
	res, err := Run(t.Context(), env, spec, progress)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]outcome.Outcome{
		"hello-world__hello-solo-mock__1":       outcome.Passed,
		"hello-world__test-wrong__1":            outcome.Failed,
		"broken-dockerfile__hello-solo-mock__1": outcome.UnscoredInfra,
		"broken-dockerfile__test-wrong__1":      outcome.UnscoredInfra,
	}
	for name, o := range want {
		if res.Trials[name] != o {
			t.Errorf("%s: %s, want %s", name, res.Trials[name], o)
		}
	}
	if runningAtFirstStart < 1 {
		t.Errorf("when the first trial started, the job's result.json said %d trials were running", runningAtFirstStart)
	}
	if res.Total != 4 || res.Stats.Retries != 2 || res.Stats.Completed != 2 || res.Stats.Errored != 2 || res.FinishedAt == nil {
		t.Errorf("job result %+v", res)
	}
	if c := res.Conditions["test-wrong"]; c.Passed != 0 || c.Failed != 1 || c.UnscoredInfra != 1 || c.PassRate == nil || *c.PassRate != 0 || c.Scored != 1 {
		t.Errorf("condition stats %+v", c)
	}
	// Each infrastructure failure was kept aside before its retry.
	superseded, _ := filepath.Glob(filepath.Join(dir, ".superseded", "broken-dockerfile__*.infra-1.*", "result.json"))
	if len(superseded) != 2 {
		t.Errorf("superseded runs: %v", superseded)
	}
	for _, f := range []string{"config.json", "lock.json", "result.json", "job.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	jobID := checkHarborJob(t, dir)
	if jobID != res.ID || res.JobID != env.JobID {
		t.Errorf("the job's ids: %q on disk, %q returned; troupe's %q, want %q", jobID, res.ID, res.JobID, env.JobID)
	}
	// No secret anywhere in the job folder.
	for name := range want {
		noSecrets(t, filepath.Join(dir, name))
	}
	for _, f := range []string{"config.json", "lock.json", "result.json", "job.log"} {
		if data, _ := os.ReadFile(filepath.Join(dir, f)); token.Match(data) {
			t.Errorf("%s holds a gateway token", f)
		}
	}
	if len(jobEvents) < 4 || jobEvents[0].Type != EventStarted || jobEvents[0].Total != 4 || jobEvents[len(jobEvents)-1].Type != EventFinished {
		t.Errorf("job events %+v", jobEvents)
	}

	// Resume: scored trials are kept as they are; the unscored are redone.
	before, _ := trialdir.ReadResult(filepath.Join(dir, "hello-world__hello-solo-mock__1", "result.json"))
	finished = map[string]outcome.Outcome{}
	jobEvents = nil
	spec.Retries = 0
	res2, err := Run(t.Context(), env, spec, progress)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := trialdir.ReadResult(filepath.Join(dir, "hello-world__hello-solo-mock__1", "result.json"))
	if before.ID != after.ID || !before.FinishedAt.Equal(after.FinishedAt) {
		t.Errorf("a finished trial was run again: %s then %s", before.ID, after.ID)
	}
	if len(finished) != 2 || finished["broken-dockerfile__test-wrong__1"] != outcome.UnscoredInfra || jobEvents[0].Kept != 2 {
		t.Errorf("rerun ran %v, kept %d", finished, jobEvents[0].Kept)
	}
	if res2.Stats.Completed != 2 || res2.Trials["hello-world__test-wrong__1"] != outcome.Failed {
		t.Errorf("resumed job result %+v", res2)
	}
	// Harbor keeps a job's id across its runs: kept and redone trials name
	// the same job.
	if again := checkHarborJob(t, dir); again != jobID || res2.ID != jobID {
		t.Errorf("the resumed job's id %q (on disk %q), the first run's %q", res2.ID, again, jobID)
	}
}

func TestJobRefusesChangedInputs(t *testing.T) {
	env := testEnv(t)
	dir := filepath.Join(t.TempDir(), "job")
	work := t.TempDir()
	// A copy of the solo manifest and of the task, to change them later.
	m := filepath.Join(work, "solo.yaml")
	data, _ := os.ReadFile("../examples/manifests/solo.yaml")
	os.WriteFile(m, data, 0o644)
	taskDir := filepath.Join(work, "hello-world")
	os.CopyFS(taskDir, os.DirFS(helloWorld))
	spec := Spec{Dir: dir, Conditions: []Condition{cond(t, m)}, Tasks: []*task.Task{loadTask(t, taskDir)}}
	if _, err := Run(t.Context(), env, spec, Progress{}); err != nil {
		t.Fatal(err)
	}

	os.WriteFile(m, []byte(strings.Replace(string(data), "max_calls: 20", "max_calls: 21", 1)), 0o644)
	os.WriteFile(filepath.Join(taskDir, "instruction.md"), []byte("Create /app/hello.txt with Hello, world! now.\n"), 0o644)
	spec = Spec{Dir: dir, Conditions: []Condition{cond(t, m)}, Tasks: []*task.Task{loadTask(t, taskDir)}}
	_, err := Run(t.Context(), env, spec, Progress{})
	if err == nil || !strings.Contains(err.Error(), "condition hello-solo-mock changed") || !strings.Contains(err.Error(), "task hello-world changed") {
		t.Fatalf("a changed manifest and task were not refused: %v", err)
	}
	// Two rosters under one condition name are refused before anything runs.
	spec.Conditions = append(spec.Conditions, cond(t, "../examples/manifests/solo.yaml"))
	if _, err := Run(t.Context(), env, spec, Progress{}); err == nil || !strings.Contains(err.Error(), "both name condition") {
		t.Fatalf("duplicate condition: %v", err)
	}

	// With lock.json removed by hand, the result of the old inputs is not
	// kept as a result of the new ones: it is set aside and run again.
	os.Remove(filepath.Join(dir, "lock.json"))
	spec.Conditions = spec.Conditions[:1]
	res, err := Run(t.Context(), env, spec, Progress{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Total != 1 || res.Stats.Completed != 1 {
		t.Errorf("job %+v", res.Stats)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, ".superseded", "hello-world__hello-solo-mock__1.other-inputs.*")); len(aside) != 1 {
		t.Errorf("the result of the old inputs was not set aside: %v", aside)
	}
}

// Inputs that changed before any of their trials finished are not refused:
// a job stopped early, or refused, can be corrected and run again.
func TestLockAllowsChangesWithoutResults(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Dir: dir, Conditions: []Condition{cond(t, "../examples/manifests/solo.yaml")}, Tasks: []*task.Task{loadTask(t, helloWorld)}}
	if err := checkLock(lockPlan(spec), "v", 1); err != nil {
		t.Fatal(err)
	}
	changed := *spec.Tasks[0]
	changed.Digest = "sha256:other"
	spec.Tasks = []*task.Task{&changed}
	if err := checkLock(lockPlan(spec), "v", 1); err != nil {
		t.Fatalf("a task with no results was refused: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "lock.json")); !strings.Contains(string(data), "sha256:other") {
		t.Errorf("lock.json was not updated: %s", data)
	}
	// Once a trial of it finished, a change is refused.
	trialDir := filepath.Join(dir, "hello-world__hello-solo-mock__1")
	os.MkdirAll(trialDir, 0o755)
	os.WriteFile(filepath.Join(trialDir, "result.json"), []byte(`{"trial_name":"hello-world__hello-solo-mock__1","outcome":"passed","finished_at":"2026-11-30T00:00:00Z"}`), 0o644)
	changed.Digest = "sha256:third"
	if err := checkLock(lockPlan(spec), "v", 1); err == nil || !strings.Contains(err.Error(), "task hello-world changed") {
		t.Errorf("a task with results changed: %v", err)
	}
	// So is another timeout multiplier: the limits differ.
	changed.Digest = "sha256:other"
	if err := checkLock(lockPlan(spec), "v", 0.5); err == nil || !strings.Contains(err.Error(), "--timeout-multiplier was 1 when the job started, it is 0.5 now") {
		t.Errorf("another multiplier: %v", err)
	}
}

// TestLockRefusesAChangedStack: the stack a condition's agents run is
// locked by digest; once a trial of it finished, another build of it is
// refused, naming the stack; a stack no result came from may change.
func TestLockRefusesAChangedStack(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(t.TempDir(), "run.sh")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	st := &stack.Stack{Name: "plain", Source: "stacks.yaml", Command: []string{"/opt/plain/run.sh"},
		Files: []stack.File{{Path: script, To: "/opt/plain/run.sh", Mode: 0o755, SHA256: "sha256:" + strings.Repeat("a", 64)}}}
	c := Condition{Path: "plain-stack.yaml", Team: team(t, testdata("manifests", "plain-stack.yaml")), Stacks: stack.Set{"plain": st}}
	spec := Spec{Dir: dir, Conditions: []Condition{c}, Tasks: []*task.Task{loadTask(t, helloWorld)}}
	if err := checkLock(lockPlan(spec), "v", 1); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "lock.json")); !strings.Contains(string(data), st.Digest()) || !strings.Contains(string(data), `"name": "plain"`) {
		t.Errorf("lock.json does not lock the stack: %s", data)
	}
	rebuilt := *st
	rebuilt.Files = []stack.File{{Path: script, To: "/opt/plain/run.sh", Mode: 0o755, SHA256: "sha256:" + strings.Repeat("b", 64)}}
	c.Stacks = stack.Set{"plain": &rebuilt}
	spec.Conditions = []Condition{c}
	if err := checkLock(lockPlan(spec), "v", 1); err != nil {
		t.Fatalf("a stack with no results was refused: %v", err)
	}
	trialDir := filepath.Join(dir, "hello-world__test-plain-stack__1")
	os.MkdirAll(trialDir, 0o755)
	os.WriteFile(filepath.Join(trialDir, "result.json"), []byte(`{"trial_name":"hello-world__test-plain-stack__1","outcome":"passed","finished_at":"2026-11-30T00:00:00Z"}`), 0o644)
	c.Stacks = stack.Set{"plain": st}
	spec.Conditions = []Condition{c}
	if err := checkLock(lockPlan(spec), "v", 1); err == nil || !strings.Contains(err.Error(), "stack plain changed") {
		t.Errorf("a stack with results changed: %v", err)
	}
}

func TestJobFolderIsOneRunsAtATime(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockFolder(dir); err == nil || !strings.Contains(err.Error(), "another troupe run is using the job folder") {
		t.Errorf("a second lock: %v", err)
	}
	unlock()
	again, err := lockFolder(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again()
}

func TestPlanRefusesNamesThatCannotNameFolders(t *testing.T) {
	c := cond(t, "../examples/manifests/solo.yaml")
	for _, name := range []string{"Team A", "mock/team", "..", `a"b`} {
		bad := c
		m := *c.Team.Manifest
		m.Condition = name
		team := *c.Team
		team.Manifest = &m
		bad.Team = &team
		if _, err := NewPlan(Spec{Conditions: []Condition{bad}, Tasks: []*task.Task{loadTask(t, helloWorld)}, Attempts: 1}); err == nil || !strings.Contains(err.Error(), "cannot name a trial folder") {
			t.Errorf("condition %q: %v", name, err)
		}
	}
	long := *loadTask(t, helloWorld)
	long.Name = strings.Repeat("t", 110)
	if _, err := NewPlan(Spec{Conditions: []Condition{c}, Tasks: []*task.Task{&long}, Attempts: 1}); err == nil || !strings.Contains(err.Error(), "too long for a relay channel") {
		t.Errorf("a long name: %v", err)
	}
}

func TestJobCancel(t *testing.T) {
	env := testEnv(t)
	dir := filepath.Join(t.TempDir(), "job")
	// Two at a time: the trials that run together finish together, so the
	// job is cancelled once two have passed and a third has started, which
	// is then mid-work (its agent sleeps 4 s), with three more pending.
	spec := Spec{Dir: dir, Conditions: []Condition{cond(t, testdata("manifests", "slow.yaml"))}, Tasks: []*task.Task{loadTask(t, helloWorld)}, Attempts: 6, Concurrency: 2}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	done, started := 0, 0
	progress := Progress{Trial: func(e trial.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Type == trial.EventStarted:
			started++
		case e.Type == trial.EventFinished && e.Outcome == outcome.Passed:
			done++
		}
		if done >= 2 && started > 2 {
			cancel() // mid-job: some trials done, others running, others pending
		}
	}}
	start := time.Now()
	res, err := Run(ctx, env, spec, progress)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cancelled job after %s: %+v", time.Since(start), res.Stats)
	if res.FinishedAt != nil || res.Stats.Completed < 2 || res.Stats.Cancelled < 1 || res.Stats.Completed+res.Stats.Cancelled >= 6 {
		t.Errorf("cancelled job result: %+v", res.Stats)
	}
	left, err := testRT.List(context.Background(), map[string]string{runtime.LabelJob: env.JobID})
	if err != nil || len(left) != 0 {
		t.Errorf("left behind after cancel: %v %v", left, err)
	}
	// The rerun finishes the job without rerunning what passed.
	res2, err := Run(t.Context(), env, spec, Progress{})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Stats.Completed != 6 || res2.Conditions["test-slow"].Passed != 6 || res2.FinishedAt == nil {
		t.Errorf("rerun: %+v", res2.Stats)
	}
	cancelled, _ := filepath.Glob(filepath.Join(dir, ".superseded", "*.unfinished.*"))
	if len(cancelled) != res.Stats.Cancelled {
		t.Errorf("%d cancelled trials, %d kept aside", res.Stats.Cancelled, len(cancelled))
	}
}

// TestJobCountsWhatRetriedRunsSpent: a run redone after an infrastructure
// failure was paid for. The job's totals count it, as the progress line
// (which adds every finished run) does, while its outcome is replaced.
func TestJobCountsWhatRetriedRunsSpent(t *testing.T) {
	c := cond(t, "../examples/manifests/solo.yaml")
	name := c.Team.Manifest.Condition
	j := &runner{res: &Result{Conditions: map[string]*ConditionStats{name: {}}, Trials: map[string]outcome.Outcome{}}}
	p := &PlanTrial{Name: "t__" + name + "__1", Condition: name, cond: c}
	redone := &trialdir.TrialResult{Outcome: outcome.UnscoredInfra, AgentResult: trialdir.AgentResult{CostUSD: 0.5, NInputTokens: 100}}
	final := &trialdir.TrialResult{Outcome: outcome.Passed, AgentResult: trialdir.AgentResult{CostUSD: 0.25, NInputTokens: 40}}
	j.spent(p, redone)
	j.count(p, final)
	got := j.res.Conditions[name]
	if got.CostUSD != 0.75 || j.res.Stats.CostUSD != 0.75 || j.res.Stats.InputTokens != 140 {
		t.Errorf("condition cost %v, job cost %v, input tokens %d; want 0.75, 0.75, 140", got.CostUSD, j.res.Stats.CostUSD, j.res.Stats.InputTokens)
	}
	if got.Trials != 1 || got.Passed != 1 || got.UnscoredInfra != 0 || j.res.Trials[p.Name] != outcome.Passed {
		t.Errorf("the redone run's outcome was counted: %+v", got)
	}
}

// TestJobResultWritesMoneyToTheMicroDollar: the job's totals add trials'
// costs up, float noise and all (seven trials of $0.0034 make
// 0.023799999999999998); its result.json writes them to the micro-dollar.
func TestJobResultWritesMoneyToTheMicroDollar(t *testing.T) {
	c := cond(t, "../examples/manifests/solo.yaml")
	name := c.Team.Manifest.Condition
	j := &runner{plan: &Plan{Dir: t.TempDir()}, log: slog.New(slog.DiscardHandler),
		res: &Result{Conditions: map[string]*ConditionStats{name: {}}, Trials: map[string]outcome.Outcome{}}}
	for i := range 7 {
		p := &PlanTrial{Name: fmt.Sprintf("t__%s__%d", name, i+1), Condition: name, cond: c}
		j.count(p, &trialdir.TrialResult{Outcome: outcome.Passed, AgentResult: trialdir.AgentResult{CostUSD: 0.0034}})
	}
	if j.res.Stats.CostUSD == 0.0238 {
		t.Fatal("the sum has no noise to round: pick other costs")
	}
	j.write()
	data, err := os.ReadFile(filepath.Join(j.plan.Dir, trialdir.JobResult))
	if err != nil {
		t.Fatal(err)
	}
	got := regexp.MustCompile(`"cost_usd":\s*([^,}\s]+)`).FindAllStringSubmatch(string(data), -1)
	if len(got) != 2 || got[0][1] != "0.0238" || got[1][1] != "0.0238" {
		t.Errorf("the job's amounts %v in %s, want 0.0238 twice (the stats' and the condition's)", got, data)
	}
}

// lockPlan is what checkLock reads of spec's plan, made without NewPlan's
// checks: the lock tests pin stacks whose files are not there.
func lockPlan(spec Spec) *Plan {
	return &Plan{Dir: spec.Dir, Stacks: planStacks(spec.Conditions), spec: spec}
}
