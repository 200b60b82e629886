package trial

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/trialdir"
)

// Harbor's TrialResult, written down from Harbor 0.13.1 (commit
// 2922220bf78bf22e2ff3b30147cbbe15ad02c7c9, 2026-06-09, of the full-history
// fork lieexxli/harbor of laude-institute/harbor): TrialResult, TimingInfo,
// ExceptionInfo, AgentInfo and ModelInfo in src/harbor/models/trial/result.py;
// TrialConfig, TaskConfig, AgentConfig, EnvironmentConfig and VerifierConfig
// in src/harbor/models/trial/config.py; LocalTaskId in
// src/harbor/models/task/id.py; AgentContext in
// src/harbor/models/agent/context.py; VerifierResult in
// src/harbor/models/verifier/result.py; EnvironmentType in
// src/harbor/models/environment_type.py. No model sets model_config's
// extra, so pydantic ignores troupe's own fields.
//
// Where troupe promises more than Harbor checks, the entry says so
// ("troupe:"): an id always written, local tasks only, a provider always
// named, a trial_uri that is a file:// URI.

// harborKind is the set of JSON types a field takes.
type harborKind uint8

const (
	hString harborKind = 1 << iota
	hInt
	hNumber // a float or an int
	hBool
	hObject
	hArray
	hNull
)

func (k harborKind) String() string {
	var names []string
	for i, name := range []string{"string", "integer", "number", "bool", "object", "array", "null"} {
		if k&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, " or ")
}

// String formats a field's strings must have.
const (
	fUUID     = "uuid"      // pydantic UUID, in its canonical form
	fDateTime = "date-time" // pydantic datetime, as RFC 3339
	fFileURI  = "file-uri"  // an absolute file:// URI
)

// harborField is one field of the model: its dotted path ("*" stands for
// every key of a map), the JSON types it takes, whether it must be there
// when its parent object is, and what its string must look like (a format
// or, with enum, one of a list).
type harborField struct {
	path     string
	kinds    harborKind
	required bool
	format   string
	enum     []string
}

var (
	environmentTypes = []string{"docker", "daytona", "e2b", "modal", "runloop", "langsmith", "gke", "novita", "apple-container",
		"singularity", "islo", "tensorlake", "cwsandbox", "wandb", "use-computer"}
	resourceModes = []string{"auto", "limit", "request", "guarantee", "ignore"}
)

var harborTrialResult = []harborField{
	// TrialResult.
	{path: "id", kinds: hString, required: true, format: fUUID}, // Harbor: UUID = uuid4(); troupe: always written
	{path: "task_name", kinds: hString, required: true},
	{path: "trial_name", kinds: hString, required: true},
	{path: "trial_uri", kinds: hString, required: true, format: fFileURI},
	{path: "task_id", kinds: hObject, required: true},       // LocalTaskId | GitTaskId | PackageTaskId
	{path: "task_id.path", kinds: hString, required: true},  // troupe: LocalTaskId{path} only
	{path: "task_id.git_url", kinds: hNull},                 // troupe: never a GitTaskId
	{path: "source", kinds: hString | hNull},                // str | None = None
	{path: "task_checksum", kinds: hString, required: true}, // str
	{path: "config", kinds: hObject, required: true},        // TrialConfig
	{path: "agent_info", kinds: hObject, required: true},    // AgentInfo
	{path: "agent_result", kinds: hObject | hNull},          // AgentContext | None
	{path: "verifier_result", kinds: hObject | hNull},       // VerifierResult | None
	{path: "exception_info", kinds: hObject | hNull},        // ExceptionInfo | None
	{path: "started_at", kinds: hString | hNull, format: fDateTime},
	{path: "finished_at", kinds: hString | hNull, format: fDateTime},
	{path: "environment_setup", kinds: hObject | hNull}, // TimingInfo | None
	{path: "agent_setup", kinds: hObject | hNull},
	{path: "agent_execution", kinds: hObject | hNull},
	{path: "verifier", kinds: hObject | hNull},
	{path: "step_results", kinds: hArray | hNull}, // list[StepResult] | None

	// TimingInfo.
	{path: "environment_setup.started_at", kinds: hString | hNull, format: fDateTime},
	{path: "environment_setup.finished_at", kinds: hString | hNull, format: fDateTime},
	{path: "agent_setup.started_at", kinds: hString | hNull, format: fDateTime},
	{path: "agent_setup.finished_at", kinds: hString | hNull, format: fDateTime},
	{path: "agent_execution.started_at", kinds: hString | hNull, format: fDateTime},
	{path: "agent_execution.finished_at", kinds: hString | hNull, format: fDateTime},
	{path: "verifier.started_at", kinds: hString | hNull, format: fDateTime},
	{path: "verifier.finished_at", kinds: hString | hNull, format: fDateTime},

	// AgentInfo, ModelInfo.
	{path: "agent_info.name", kinds: hString, required: true},
	{path: "agent_info.version", kinds: hString, required: true},
	{path: "agent_info.model_info", kinds: hObject | hNull},
	{path: "agent_info.model_info.name", kinds: hString, required: true},
	// str | None since 0.5.0 (April 2026), str before; troupe: always a str.
	{path: "agent_info.model_info.provider", kinds: hString, required: true},

	// AgentContext: every field int/float/list/dict | None = None.
	{path: "agent_result.n_input_tokens", kinds: hInt | hNull},
	{path: "agent_result.n_cache_tokens", kinds: hInt | hNull},
	{path: "agent_result.n_output_tokens", kinds: hInt | hNull},
	{path: "agent_result.cost_usd", kinds: hNumber | hNull},
	{path: "agent_result.rollout_details", kinds: hArray | hNull},
	{path: "agent_result.metadata", kinds: hObject | hNull},

	// VerifierResult: rewards: dict[str, float | int] | None = None.
	{path: "verifier_result.rewards", kinds: hObject | hNull},
	{path: "verifier_result.rewards.*", kinds: hNumber},

	// ExceptionInfo: every field required.
	{path: "exception_info.exception_type", kinds: hString, required: true},
	{path: "exception_info.exception_message", kinds: hString, required: true},
	{path: "exception_info.exception_traceback", kinds: hString, required: true},
	{path: "exception_info.occurred_at", kinds: hString, required: true, format: fDateTime},

	// TrialConfig: task required, the rest defaulted.
	{path: "config.task", kinds: hObject, required: true},
	{path: "config.trial_name", kinds: hString},
	{path: "config.trials_dir", kinds: hString},
	{path: "config.timeout_multiplier", kinds: hNumber},
	{path: "config.agent_timeout_multiplier", kinds: hNumber | hNull},
	{path: "config.verifier_timeout_multiplier", kinds: hNumber | hNull},
	{path: "config.agent_setup_timeout_multiplier", kinds: hNumber | hNull},
	{path: "config.environment_build_timeout_multiplier", kinds: hNumber | hNull},
	{path: "config.agent", kinds: hObject},
	{path: "config.environment", kinds: hObject},
	{path: "config.verifier", kinds: hObject},
	{path: "config.artifacts", kinds: hArray},
	{path: "config.extra_instruction_paths", kinds: hArray},
	{path: "config.job_id", kinds: hString | hNull, format: fUUID},

	// TaskConfig: a path or a name, not both; ref needs a name.
	{path: "config.task.path", kinds: hString, required: true}, // troupe: local tasks
	{path: "config.task.name", kinds: hNull},                   // refused beside a path
	{path: "config.task.ref", kinds: hNull},                    // needs a name
	{path: "config.task.git_url", kinds: hString | hNull},
	{path: "config.task.git_commit_id", kinds: hString | hNull},
	{path: "config.task.overwrite", kinds: hBool},
	{path: "config.task.download_dir", kinds: hString | hNull},
	{path: "config.task.source", kinds: hString | hNull},

	// AgentConfig.
	{path: "config.agent.name", kinds: hString | hNull},
	{path: "config.agent.import_path", kinds: hString | hNull},
	{path: "config.agent.model_name", kinds: hString | hNull},
	{path: "config.agent.skills", kinds: hArray},
	{path: "config.agent.override_timeout_sec", kinds: hNumber | hNull},
	{path: "config.agent.override_setup_timeout_sec", kinds: hNumber | hNull},
	{path: "config.agent.max_timeout_sec", kinds: hNumber | hNull},
	{path: "config.agent.extra_allowed_hosts", kinds: hArray},
	{path: "config.agent.kwargs", kinds: hObject},
	{path: "config.agent.env", kinds: hObject},
	{path: "config.agent.env.*", kinds: hString},
	{path: "config.agent.mcp_servers", kinds: hArray},

	// EnvironmentConfig.
	{path: "config.environment.type", kinds: hString | hNull, enum: environmentTypes},
	{path: "config.environment.import_path", kinds: hString | hNull},
	{path: "config.environment.force_build", kinds: hBool},
	{path: "config.environment.delete", kinds: hBool},
	{path: "config.environment.cpu_enforcement_policy", kinds: hString, enum: resourceModes},
	{path: "config.environment.memory_enforcement_policy", kinds: hString, enum: resourceModes},
	{path: "config.environment.override_cpus", kinds: hInt | hNull},
	{path: "config.environment.override_memory_mb", kinds: hInt | hNull},
	{path: "config.environment.override_storage_mb", kinds: hInt | hNull},
	{path: "config.environment.override_gpus", kinds: hInt | hNull},
	{path: "config.environment.override_tpu", kinds: hObject | hNull},
	{path: "config.environment.mounts", kinds: hArray | hNull},
	{path: "config.environment.extra_docker_compose", kinds: hArray},
	{path: "config.environment.env", kinds: hObject},
	{path: "config.environment.env.*", kinds: hString},
	{path: "config.environment.kwargs", kinds: hObject},
	{path: "config.environment.extra_allowed_hosts", kinds: hArray},

	// VerifierConfig.
	{path: "config.verifier.override_timeout_sec", kinds: hNumber | hNull},
	{path: "config.verifier.max_timeout_sec", kinds: hNumber | hNull},
	{path: "config.verifier.env", kinds: hObject},
	{path: "config.verifier.env.*", kinds: hString},
	{path: "config.verifier.import_path", kinds: hString | hNull},
	{path: "config.verifier.kwargs", kinds: hObject},
	{path: "config.verifier.disable", kinds: hBool},
}

// checkHarborResult fails the test unless data is a TrialResult Harbor
// reads.
func checkHarborResult(t testing.TB, data []byte) {
	t.Helper()
	for _, p := range harborProblems(data) {
		t.Errorf("result.json is not Harbor's TrialResult: %s", p)
	}
}

// harborProblems lists what keeps data from being Harbor's TrialResult,
// one located problem each.
func harborProblems(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	if _, ok := doc.(map[string]any); !ok {
		return []string{"not a JSON object"}
	}
	var problems []string
	for _, f := range harborTrialResult {
		parent, key := "", f.path
		if i := strings.LastIndexByte(f.path, '.'); i >= 0 {
			parent, key = f.path[:i], f.path[i+1:]
		}
		// A parent that is absent, null or not an object has no fields to
		// check (its own entry says whether that is allowed).
		for at, v := range lookup(doc, "", parent) {
			obj, ok := v.(map[string]any)
			if !ok {
				continue
			}
			keys := []string{key}
			if key == "*" {
				keys = slices.Sorted(maps.Keys(obj))
			}
			for _, k := range keys {
				path := strings.TrimPrefix(at+"."+k, ".")
				v, ok := obj[k]
				if !ok {
					if f.required {
						problems = append(problems, path+": missing")
					}
					continue
				}
				if msg := f.check(v); msg != "" {
					problems = append(problems, path+": "+msg)
				}
			}
		}
	}
	return problems
}

// lookup yields the values at a dotted path below v (at is v's path), one
// for each key where the path has "*".
func lookup(v any, at, path string) func(yield func(string, any) bool) {
	return func(yield func(string, any) bool) {
		var walk func(v any, at, path string) bool
		walk = func(v any, at, path string) bool {
			if path == "" {
				return yield(at, v)
			}
			obj, ok := v.(map[string]any)
			if !ok {
				return true
			}
			key, rest, _ := strings.Cut(path, ".")
			keys := []string{key}
			if key == "*" {
				keys = slices.Sorted(maps.Keys(obj))
			}
			for _, k := range keys {
				if child, ok := obj[k]; ok && !walk(child, strings.TrimPrefix(at+"."+k, "."), rest) {
					return false
				}
			}
			return true
		}
		walk(v, at, path)
	}
}

var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// check says what is wrong with a field's value; "" if nothing.
func (f harborField) check(v any) string {
	var kind harborKind
	switch v := v.(type) {
	case nil:
		kind = hNull
	case string:
		kind = hString
	case bool:
		kind = hBool
	case json.Number:
		kind = hNumber
		if _, err := v.Int64(); err == nil {
			kind = hInt
		}
	case map[string]any:
		kind = hObject
	case []any:
		kind = hArray
	}
	allowed := f.kinds
	if allowed&hNumber != 0 {
		allowed |= hInt
	}
	if kind&allowed == 0 {
		return fmt.Sprintf("%s, want %s", kind, f.kinds)
	}
	s, ok := v.(string)
	if !ok {
		return ""
	}
	switch {
	case f.enum != nil && !slices.Contains(f.enum, s):
		return fmt.Sprintf("%q, want one of %s", s, strings.Join(f.enum, ", "))
	case f.format == fUUID && !canonicalUUID.MatchString(s):
		return fmt.Sprintf("%q is not a UUID", s)
	case f.format == fDateTime:
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return fmt.Sprintf("%q is not an RFC 3339 date-time", s)
		}
	case f.format == fFileURI:
		if u, err := url.Parse(s); err != nil || u.Scheme != "file" || !strings.HasPrefix(u.Path, "/") {
			return fmt.Sprintf("%q is not a file:// URI of an absolute path", s)
		}
	}
	return ""
}

// harborSpec is a trial of the solo example on hello-world, as a job plans
// it; loading needs no Docker.
func harborSpec(t *testing.T) (*Env, Spec) {
	t.Helper()
	env := &Env{Gateway: llm.New(nil), JobID: "jobs-1760000000", Version: "test", Limits: DefaultLimits}
	manifestPath := "../examples/manifests/solo.yaml"
	tm := team(t, manifestPath)
	spec := Spec{Name: "hello-world__" + tm.Manifest.Condition + "__1", Dir: filepath.Join(t.TempDir(), "job", "hello-world__hello-solo-mock__1"),
		Team: tm, ManifestPath: manifestPath, Task: loadTask(t, helloWorld), Attempt: 1}
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
	return map[string]*trialdir.TrialResult{"passed": passed, "infra_error": broken}
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
	if !canonicalUUID.MatchString(res.ID) || res.TrialID != "internal-id" {
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
	if res.Config.TimeoutMultiplier != 1 {
		t.Errorf("timeout_multiplier %v", res.Config.TimeoutMultiplier)
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
		{"a GitTaskId", func(doc map[string]any) { obj(doc, "task_id")["git_url"] = "https://example.com/t.git" }, "task_id.git_url: string, want null"},
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
		{"task name beside path", func(doc map[string]any) { obj(doc, "config.task")["name"] = "troupe/hello-world" }, "config.task.name"},
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
			problems := harborProblems(data)
			switch {
			case c.want == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case c.want != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }):
				t.Errorf("problems %q, want one saying %q", problems, c.want)
			}
		})
	}
	for _, bad := range []string{"", "[]", "{"} {
		if len(harborProblems([]byte(bad))) == 0 {
			t.Errorf("%q passed", bad)
		}
	}
}

func TestHarborUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newUUID()
		// Version 4, variant 10xx (RFC 9562).
		if !canonicalUUID.MatchString(id) || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) || seen[id] {
			t.Fatalf("%q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
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
