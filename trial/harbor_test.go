package trial

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/internal/harbormodel"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trialdir"
)

// Harbor's models of a trial folder's files are written down, field by
// field, in internal/harbormodel (TrialResult for result.json, TrialConfig
// for config.json): every trial the tests run is checked against them.

// checkHarborFiles fails the test unless the trial folder's result.json
// is a TrialResult and its config.json a TrialConfig Harbor reads, the
// same as result.json's config (Harbor writes one model to both).
func checkHarborFiles(t testing.TB, dir string) {
	t.Helper()
	result := harbormodel.TrialResult.CheckFile(t, filepath.Join(dir, trialdir.Result))
	config := harbormodel.TrialConfig.CheckFile(t, filepath.Join(dir, trialdir.Config))
	var res struct {
		Config trialdir.TrialConfig `json:"config"`
	}
	var start trialdir.TrialStart
	if json.Unmarshal(result, &res) != nil || json.Unmarshal(config, &start) != nil {
		t.Fatalf("%s: result.json or config.json is not JSON", dir)
	}
	if !reflect.DeepEqual(start.TrialConfig, res.Config) {
		t.Errorf("config.json's TrialConfig %+v, result.json's config %+v", start.TrialConfig, res.Config)
	}
}

// checkHarborResult fails the test unless data is a TrialResult Harbor
// reads.
func checkHarborResult(t testing.TB, data []byte) {
	t.Helper()
	for _, p := range harbormodel.TrialResult.Problems(data) {
		t.Errorf("result.json is not Harbor's TrialResult: %s", p)
	}
}

// harborSpec is a trial of the solo example on hello-world, as a job plans
// it; loading needs no Docker.
func harborSpec(t *testing.T) (*Env, Spec) {
	t.Helper()
	env := &Env{Gateway: llm.New(nil), JobID: "jobs-1760000000", Version: "test", Limits: DefaultLimits}
	manifestPath := "../examples/manifests/solo.yaml"
	tm := team(t, manifestPath)
	spec := Spec{Name: "hello-world__" + tm.Manifest.Condition + "__1", Dir: filepath.Join(t.TempDir(), "job", "hello-world__hello-solo-mock__1"),
		Team: tm, ManifestPath: manifestPath, Task: loadTask(t, helloWorld), Attempt: 1, JobUUID: trialdir.NewUUID()}
	return env, spec
}

// harborResults are results as Run leaves them: started with newResult,
// then filled in as the trial's steps do. A broken trial's exception is
// built the way newExceptionInfo builds it.
func harborResults(t *testing.T) map[string]*trialdir.TrialResult {
	t.Helper()
	env, spec := harborSpec(t)
	start := time.Now()
	at := func(s int) *time.Time { v := start.Add(time.Duration(s) * time.Second); return &v }

	passed := newResult(env, spec, spec.Name+"-0a1b2c3d", start)
	passed.Timeouts = map[string]float64{"agent": 300}
	passed.EnvironmentSetup = trialdir.Timing{StartedAt: at(0), FinishedAt: at(1)}
	passed.AgentSetup = trialdir.Timing{StartedAt: at(1), FinishedAt: at(2)}
	passed.AgentExecution = trialdir.Timing{StartedAt: at(2), FinishedAt: at(30)}
	passed.Verifier = trialdir.Timing{StartedAt: at(31), FinishedAt: at(32)}
	passed.Teardown = trialdir.Timing{StartedAt: at(32), FinishedAt: at(33)}
	passed.CompletionReason, passed.Outcome = DeclaredDone, "passed"
	reward := 1.0
	passed.Reward, passed.VerifierResult = &reward, &trialdir.VerifierResult{Rewards: map[string]float64{"reward": 1}}
	passed.AgentResult = trialdir.AgentResult{NInputTokens: 1200, NCacheTokens: 200, NOutputTokens: 80, CostUSD: 0.01, NCalls: 3}
	passed.Agents = []trialdir.AgentRecord{{ID: "solo-1", ClassID: "solo", Kind: "orchestrator", Role: "solo", Endpoint: "mock/hello-solo", UID: 10001}}
	passed.FinishedAt = *at(33)

	broken := newResult(env, spec, spec.Name+"-4e5f6a7b", start)
	broken.EnvironmentSetup = trialdir.Timing{StartedAt: at(0)}
	broken.CompletionReason, broken.Outcome = InfraError, "unscored_infra"
	cause := fmt.Errorf("start container: %w", errors.Join(errors.New("no such image"), runtime.ErrNotFound))
	broken.ExceptionInfo = newExceptionInfo(ErrContainer, cause, *at(1))
	broken.FinishedAt = *at(2)

	// A task of a registry's dataset, as troupe run --dataset gives it.
	spec.Task.Origin = &testOrigin
	fromDataset := newResult(env, spec, spec.Name+"-8c9d0e1f", start)
	fromDataset.CompletionReason, fromDataset.Outcome = DeclaredDone, "failed"
	fromDataset.VerifierResult = &trialdir.VerifierResult{Rewards: map[string]float64{"reward": 0}}
	return map[string]*trialdir.TrialResult{"passed": passed, "infra_error": broken, "dataset": fromDataset}
}

// testOrigin is where a task of a dataset came from.
var testOrigin = task.Origin{Name: "terminal-bench", Version: "2.0", Registry: "https://example.com/registry.json",
	GitURL: "https://example.com/tasks.git", GitCommit: "0123456789abcdef0123456789abcdef01234567", Path: "tasks/hello-world"}

// TestHarborDatasetTask: a task of a dataset is recorded as Harbor records
// it (a GitTaskId, the dataset's name as source, config.task the
// repository, commit and path), and whole in troupe's dataset.
func TestHarborDatasetTask(t *testing.T) {
	env, spec := harborSpec(t)
	spec.Task.Origin = &testOrigin
	res := newResult(env, spec, "internal-id", time.Now())
	o := testOrigin
	if want := (trialdir.TaskID{GitURL: o.GitURL, GitCommitID: o.GitCommit, Path: o.Path}); res.TaskID != want {
		t.Errorf("task_id %+v, want %+v", res.TaskID, want)
	}
	if c := res.Config.Task; c.Path != o.Path || c.GitURL != o.GitURL || c.GitCommitID != o.GitCommit || c.Source == nil || *c.Source != o.Name {
		t.Errorf("config.task %+v", c)
	}
	if res.Source == nil || *res.Source != o.Name || res.TaskPath != spec.Task.Dir || res.TaskName != "hello-world" {
		t.Errorf("source %v, task_path %q, task_name %q", res.Source, res.TaskPath, res.TaskName)
	}
	want := trialdir.DatasetTask{Name: o.Name, Version: o.Version, Registry: o.Registry, GitURL: o.GitURL, GitCommitID: o.GitCommit, Path: o.Path}
	if res.Dataset == nil || *res.Dataset != want {
		t.Errorf("dataset %+v, want %+v", res.Dataset, want)
	}
}

func TestHarborResultAsRunBuildsIt(t *testing.T) {
	for name, res := range harborResults(t) {
		t.Run(name, func(t *testing.T) {
			// As Run writes it.
			data, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			checkHarborResult(t, data)
			if t.Failed() {
				t.Logf("%s", data)
			}
		})
	}
}

func TestHarborResultFields(t *testing.T) {
	env, spec := harborSpec(t)
	res := newResult(env, spec, "internal-id", time.Now())
	dir, _ := filepath.Abs(spec.Dir)
	if !trialdir.IsUUID(res.ID) || res.TrialID != "internal-id" {
		t.Errorf("id %q, troupe_trial_id %q", res.ID, res.TrialID)
	}
	if want := "file://" + dir; res.TrialURI != want {
		t.Errorf("trial_uri %q, want %q", res.TrialURI, want)
	}
	if res.TaskID.Path != spec.Task.Dir || res.Config.Task.Path != spec.Task.Dir || res.Config.TrialsDir != filepath.Dir(dir) || res.Config.TrialName != spec.Name {
		t.Errorf("task_id %+v, config %+v", res.TaskID, res.Config)
	}
	if res.Source != nil || res.Config.Task.Source != nil {
		t.Errorf("source %v, config.task.source %v, for a task that names none", res.Source, res.Config.Task.Source)
	}
	want := trialdir.AgentInfo{Name: "hello-solo-mock", Version: "test", ModelInfo: &trialdir.ModelInfo{Name: "mock/hello-solo", Provider: "mock"}}
	if res.AgentInfo.Name != want.Name || res.AgentInfo.Version != want.Version || res.AgentInfo.ModelInfo == nil || *res.AgentInfo.ModelInfo != *want.ModelInfo {
		t.Errorf("agent_info %+v %+v, want %+v %+v", res.AgentInfo, res.AgentInfo.ModelInfo, want, want.ModelInfo)
	}
	if a := res.Config.Agent; a.ModelName == nil || *a.ModelName != "mock/hello-solo" || a.MaxTimeoutSec == nil || *a.MaxTimeoutSec != 300 {
		t.Errorf("config.agent %+v", a)
	}
	if e := res.Config.Environment; e.Type != "docker" || e.OverrideCPUs == nil || *e.OverrideCPUs != 1 || e.OverrideMemoryMB == nil || *e.OverrideMemoryMB != 512 {
		t.Errorf("config.environment %+v", e)
	}
	if res.Config.TimeoutMultiplier != 1 || res.Config.JobID != spec.JobUUID {
		t.Errorf("timeout_multiplier %v, job_id %q, want %q", res.Config.TimeoutMultiplier, res.Config.JobID, spec.JobUUID)
	}
	if res.Dataset != nil {
		t.Errorf("dataset %+v for a task folder", res.Dataset)
	}
}

// TestHarborChecker shows that the checker fails what Harbor refuses.
func TestHarborChecker(t *testing.T) {
	// The broken trial's result, as JSON to change.
	base, err := json.Marshal(harborResults(t)["infra_error"])
	if err != nil {
		t.Fatal(err)
	}
	obj := func(doc map[string]any, path string) map[string]any {
		for key := range strings.SplitSeq(path, ".") {
			doc = doc[key].(map[string]any)
		}
		return doc
	}
	cases := []struct {
		name   string
		change func(doc map[string]any)
		// want is in the problem reported; "" when there is none.
		want string
	}{
		{"as built", func(map[string]any) {}, ""},
		{"no exception", func(doc map[string]any) { doc["exception_info"] = nil }, ""},
		{"exception_info left out", func(doc map[string]any) { delete(doc, "exception_info") }, ""},
		{"a GitTaskId", func(doc map[string]any) { obj(doc, "task_id")["git_url"] = "https://example.com/t.git" }, ""},
		{"a git_url that is not a string", func(doc map[string]any) { obj(doc, "task_id")["git_url"] = 7 }, "task_id.git_url: integer, want string"},
		{"a task_id of nothing", func(doc map[string]any) { doc["task_id"] = map[string]any{"git_url": "https://example.com/t.git"} }, "task_id: none of LocalTaskId"},
		{"a commit without its repository", func(doc map[string]any) { obj(doc, "config.task")["git_commit_id"] = "0a1b" }, "config.task: 'git_commit_id' requires 'git_url' to be set."},
		{"a ref without a name", func(doc map[string]any) { obj(doc, "config.task")["ref"] = "latest" }, "config.task: 'ref' requires 'name' to be set."},
		{"a task without path or name", func(doc map[string]any) { delete(obj(doc, "config.task"), "path") }, "config.task: Either 'path' or 'name' must be set."},
		{"job_id troupe's own", func(doc map[string]any) { obj(doc, "config")["job_id"] = "jobs-1760000000" }, `config.job_id: "jobs-1760000000" is not a UUID`},
		{"id missing", func(doc map[string]any) { delete(doc, "id") }, "id: missing"},
		{"id troupe's own", func(doc map[string]any) { doc["id"] = "hello-world__hello-solo-mock__1-0a1b2c3d" }, "is not a UUID"},
		{"id a number", func(doc map[string]any) { doc["id"] = 7 }, "id: integer, want string"},
		{"no traceback", func(doc map[string]any) { delete(obj(doc, "exception_info"), "exception_traceback") }, "exception_info.exception_traceback: missing"},
		{"traceback null", func(doc map[string]any) { obj(doc, "exception_info")["exception_traceback"] = nil }, "exception_traceback: null, want string"},
		{"occurred_at not a time", func(doc map[string]any) { obj(doc, "exception_info")["occurred_at"] = "just now" }, "not an RFC 3339 date-time"},
		{"started_at not a time", func(doc map[string]any) { obj(doc, "environment_setup")["started_at"] = "1760000000" }, "environment_setup.started_at"},
		{"task_id missing", func(doc map[string]any) { delete(doc, "task_id") }, "task_id: missing"},
		{"task_id a string", func(doc map[string]any) { doc["task_id"] = "hello-world" }, "task_id: string, want object"},
		{"config missing", func(doc map[string]any) { delete(doc, "config") }, "config: missing"},
		{"config.task missing", func(doc map[string]any) { delete(obj(doc, "config"), "task") }, "config.task: missing"},
		{"task name beside path", func(doc map[string]any) { obj(doc, "config.task")["name"] = "troupe/hello-world" }, "config.task: Cannot set both 'path' and 'name'."},
		{"unknown environment type", func(doc map[string]any) { obj(doc, "config.environment")["type"] = "podman" }, `"podman", want one of`},
		{"agent_info missing", func(doc map[string]any) { delete(doc, "agent_info") }, "agent_info: missing"},
		{"version a number", func(doc map[string]any) { obj(doc, "agent_info")["version"] = 1.5 }, "agent_info.version: number, want string"},
		{"provider null", func(doc map[string]any) { obj(doc, "agent_info.model_info")["provider"] = nil }, "provider: null"},
		{"tokens a fraction", func(doc map[string]any) { obj(doc, "agent_result")["n_input_tokens"] = 1.5 }, "n_input_tokens: number, want integer or null"},
		{"reward a string", func(doc map[string]any) {
			doc["verifier_result"] = map[string]any{"rewards": map[string]any{"reward": "1"}}
		}, "verifier_result.rewards.reward: string"},
		{"relative trial_uri", func(doc map[string]any) { doc["trial_uri"] = "jobs/hello-world__hello-solo-mock__1" }, "trial_uri"},
		{"trial_name missing", func(doc map[string]any) { delete(doc, "trial_name") }, "trial_name: missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal(base, &doc); err != nil {
				t.Fatal(err)
			}
			c.change(doc)
			data, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			problems := harbormodel.TrialResult.Problems(data)
			switch {
			case c.want == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case c.want != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }):
				t.Errorf("problems %q, want one saying %q", problems, c.want)
			}
		})
	}
	for _, bad := range []string{"", "[]", "{"} {
		if len(harbormodel.TrialResult.Problems([]byte(bad))) == 0 {
			t.Errorf("%q passed", bad)
		}
	}
}

func TestHarborTraceback(t *testing.T) {
	err := fmt.Errorf("start container: %w", errors.Join(errors.New("no such image"), fmt.Errorf("pull: %w", runtime.ErrNotFound)))
	info := newExceptionInfo(ErrContainer, err, time.Now())
	nf := runtime.ErrNotFound.Error()
	want := "*fmt.wrapError: start container: no such image\n" +
		"  pull: " + nf + "\n" +
		"  *errors.joinError: no such image\n" +
		"    pull: " + nf + "\n" +
		"    *errors.errorString: no such image\n" +
		"    *fmt.wrapError: pull: " + nf + "\n" +
		fmt.Sprintf("      %T: %s\n", runtime.ErrNotFound, nf)
	if info.ExceptionType != ErrContainer || info.ExceptionMessage != err.Error() || info.ExceptionTraceback != want {
		t.Errorf("%+v\ntraceback:\n%s\nwant:\n%s", info, info.ExceptionTraceback, want)
	}
}
