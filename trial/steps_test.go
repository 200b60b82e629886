package trial

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

const helloMultiStep = "testdata/tasks/hello-multi-step"

// checkSteps checks a multi-step trial's step_results: the steps that ran,
// in order, each with its reward, timings and verifier files under
// steps/<name>/verifier/, as Harbor lays them out.
func checkSteps(t *testing.T, res *trialdir.TrialResult, dir string, rewards ...float64) {
	t.Helper()
	names := []string{"create-file", "append-content"}
	if len(res.StepResults) != len(rewards) {
		t.Fatalf("%d step results, want %d: %+v", len(res.StepResults), len(rewards), res.StepResults)
	}
	for i, sr := range res.StepResults {
		if sr.StepName != names[i] || sr.Reward == nil || *sr.Reward != rewards[i] || sr.VerifierResult == nil || sr.VerifierResult.Rewards["reward"] != rewards[i] {
			t.Errorf("step %d: %+v (reward %v), want %s with reward %v", i+1, sr, sr.Reward, names[i], rewards[i])
		}
		for _, phase := range []*trialdir.Timing{sr.Setup, sr.AgentSetup, sr.AgentExecution, sr.Verifier} {
			if phase == nil || phase.StartedAt == nil || phase.FinishedAt == nil || phase.FinishedAt.Before(*phase.StartedAt) {
				t.Errorf("step %s: a phase was not timed: %+v", sr.StepName, phase)
			}
		}
		for _, f := range []string{"reward.txt", "test-stdout.txt"} {
			if _, err := os.Stat(filepath.Join(dir, "steps", sr.StepName, "verifier", f)); err != nil {
				t.Errorf("step %s: %v", sr.StepName, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "verifier")); err == nil {
		t.Error("verifier/ is left at the trial's top: each step's is under steps/<name>/")
	}
	// Harbor reads step_results as its StepResult list.
	data, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		StepResults []struct {
			StepName       string                                `json:"step_name"`
			VerifierResult *struct{ Rewards map[string]float64 } `json:"verifier_result"`
			AgentExecution *struct {
				StartedAt string `json:"started_at"`
			} `json:"agent_execution"`
		} `json:"step_results"`
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.StepResults) != len(rewards) || doc.StepResults[0].AgentExecution == nil || doc.StepResults[0].VerifierResult == nil {
		t.Errorf("step_results as Harbor reads them: %v %+v", err, doc)
	}
}

// TestMultiStepTeam: a team runs a two-step task in one container,
// launched again for each step in the same channel; each step's workdir/
// and setup.sh come before its agents, its tests (the task's, then the
// step's over them) judge it, and the trial's reward is the steps' mean.
// A first step below its min_reward ends the trial there.
func TestMultiStepTeam(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/multi-step.yaml", helloMultiStep)
	if res.Outcome != outcome.Passed || res.CompletionReason != DeclaredDone || res.Reward == nil || *res.Reward != 1 || res.ExceptionInfo != nil {
		t.Fatalf("%s / %s, reward %v, %+v", res.Outcome, res.CompletionReason, res.Reward, res.ExceptionInfo)
	}
	checkSteps(t, res, dir, 1, 1)
	for _, sr := range res.StepResults {
		if sr.CompletionReason != DeclaredDone || sr.Done == nil || !strings.HasPrefix(sr.Done.Content, "DONE:") || sr.AgentResult == nil || sr.AgentResult.NCalls != 3 {
			t.Errorf("step %s: reason %s, done %+v, usage %+v", sr.StepName, sr.CompletionReason, sr.Done, sr.AgentResult)
		}
	}
	// One channel for the whole trial: both steps' instructions and DONE:s.
	transcript, _ := os.ReadFile(filepath.Join(dir, "relay", "transcript.jsonl"))
	for _, want := range []string{"Create the file", "Append the content", "DONE: /app/hello.txt holds Hello\"", "DONE: /app/hello.txt holds Hello, world!"} {
		if !strings.Contains(string(transcript), want) {
			t.Errorf("the transcript lacks %q", want)
		}
	}
	if res.Relay.IdentityConflicts != 0 || res.Done == nil || !strings.Contains(res.Done.Content, "Hello, world!") {
		t.Errorf("relay %+v, done %+v", res.Relay, res.Done)
	}
	// The agent ran twice, logging to one file.
	if log, _ := os.ReadFile(filepath.Join(dir, "agents", "solo-1", "stderr.log")); strings.Count(string(log), `"msg":"start"`) != 2 {
		t.Errorf("the agent's log shows %d starts, want 2", strings.Count(string(log), `"msg":"start"`))
	}
	// What the first step's verifier left was troupe's, not the agents'.
	if len(res.RemovedBeforeVerifier) != 0 {
		t.Errorf("removed before the verifier: %v", res.RemovedBeforeVerifier)
	}

	res, dir = runTrial(t, env, "testdata/manifests/multi-step-wrong.yaml", helloMultiStep)
	if res.Outcome != outcome.Failed || res.Reward == nil || *res.Reward != 0 || res.ExceptionInfo != nil {
		t.Fatalf("%s / %s, reward %v, %+v", res.Outcome, res.CompletionReason, res.Reward, res.ExceptionInfo)
	}
	checkSteps(t, res, dir, 0)
	if sr := res.StepResults[0]; !strings.Contains(sr.BelowMinReward, "reward=0 below min_reward 1") {
		t.Errorf("below_min_reward %q", sr.BelowMinReward)
	}
	if _, err := os.Stat(filepath.Join(dir, "steps", "append-content")); err == nil {
		t.Error("the second step ran")
	}
}

// TestMultiStepOracle: the oracle runs each step's solution/solve.sh in
// turn, each judged by its step's tests.
func TestMultiStepOracle(t *testing.T) {
	env := testEnv(t)
	res, dir := runOracle(t, env, helloMultiStep)
	if res.Outcome != outcome.Passed || res.Reward == nil || *res.Reward != 1 {
		t.Fatalf("%s / %s, reward %v, %+v", res.Outcome, res.CompletionReason, res.Reward, res.ExceptionInfo)
	}
	checkSteps(t, res, dir, 1, 1)
}

// TestRollUpAndMinReward: a trial's rewards come from its steps' as
// Harbor derives them, and min_reward gates as Harbor's does.
func TestRollUpAndMinReward(t *testing.T) {
	step := func(rewards map[string]float64) trialdir.StepResult {
		if rewards == nil {
			return trialdir.StepResult{StepName: "broken"}
		}
		return trialdir.StepResult{StepName: "s", VerifierResult: &trialdir.VerifierResult{Rewards: rewards}}
	}
	steps := []trialdir.StepResult{step(map[string]float64{"reward": 1, "style": 0.5}), step(nil), step(map[string]float64{"reward": 0})}
	for _, c := range []struct {
		strategy string
		steps    []trialdir.StepResult
		want     map[string]float64 // nil: no verifier result
	}{
		// The mean over the steps with a result; a key a step lacks counts 0.
		{"mean", steps, map[string]float64{"reward": 0.5, "style": 0.25}},
		{"final", steps, map[string]float64{"reward": 0}},
		{"final", steps[:2], nil},
		{"mean", steps[1:2], nil},
		{"mean", nil, nil},
	} {
		got := rollUp(c.strategy, c.steps)
		switch {
		case c.want == nil && got != nil, c.want != nil && (got == nil || !maps.Equal(got.Rewards, c.want)):
			t.Errorf("%s over %d steps: %+v, want %v", c.strategy, len(c.steps), got, c.want)
		}
	}
	vr := &trialdir.VerifierResult{Rewards: map[string]float64{"reward": 0.5, "style": 0.9}}
	for _, c := range []struct {
		min  map[string]float64
		vr   *trialdir.VerifierResult
		want string
	}{
		{nil, vr, ""},
		{map[string]float64{"reward": 0.5}, vr, ""},
		{map[string]float64{"reward": 0.6}, vr, "reward=0.5 below min_reward 0.6"},
		{map[string]float64{"style": 0.8, "correctness": 0.1}, vr, "correctness missing, min_reward 0.1"},
		{map[string]float64{"reward": -1}, nil, "reward missing, min_reward -1"}, // no verifier result: -inf
	} {
		if got := belowMinReward(c.min, c.vr); got != c.want {
			t.Errorf("min_reward %v on %+v: %q, want %q", c.min, c.vr, got, c.want)
		}
	}
}

// TestMultiStepSetupFails: a step whose workdir/setup.sh fails runs
// neither its agents nor its verifier, and ends the steps; as in Harbor,
// the trial's reward is rolled up from the steps that were scored. A first
// step's failing setup.sh leaves nothing scored: the task is broken, and
// the trial unscored_infra.
func TestMultiStepSetupFails(t *testing.T) {
	env := testEnv(t)
	task := t.TempDir()
	if err := os.CopyFS(task, os.DirFS(helloMultiStep)); err != nil {
		t.Fatal(err)
	}
	setup := filepath.Join(task, "steps", "append-content", "workdir", "setup.sh")
	if err := os.WriteFile(setup, []byte("#!/bin/sh\necho 'no database to seed' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, _ := runOracle(t, env, task)
	if res.Outcome != outcome.Passed || res.Reward == nil || *res.Reward != 1 || len(res.StepResults) != 2 {
		t.Fatalf("%s, reward %v, steps %+v", res.Outcome, res.Reward, res.StepResults)
	}
	if sr := res.StepResults[1]; sr.ExceptionInfo == nil || sr.ExceptionInfo.ExceptionType != ErrStepSetup || !strings.Contains(sr.ExceptionInfo.ExceptionMessage, "workdir/setup.sh exited 3: ") || !strings.Contains(sr.ExceptionInfo.ExceptionMessage, "no database to seed") ||
		sr.VerifierResult != nil || sr.AgentExecution != nil {
		t.Errorf("the failed step: %+v, exception %+v", sr, sr.ExceptionInfo)
	}

	// The same setup.sh as the first step's.
	first := filepath.Join(task, "steps", "create-file", "workdir")
	os.MkdirAll(first, 0o755)
	if err := os.Rename(setup, filepath.Join(first, "setup.sh")); err != nil {
		t.Fatal(err)
	}
	res, _ = runOracle(t, env, task)
	if res.Outcome != outcome.UnscoredInfra || res.ExceptionInfo == nil || res.ExceptionInfo.ExceptionType != ErrStepSetup || len(res.StepResults) != 1 {
		t.Errorf("%s, %+v, steps %+v", res.Outcome, res.ExceptionInfo, res.StepResults)
	}
}
