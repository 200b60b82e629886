package trial

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/troupebench/troupe/manifest"
)

// The parts of a trial's result.json that make it a Harbor TrialResult
// (src/harbor/models/trial/result.py and trial/config.py, Harbor 0.13.1):
// Harbor reads the file with its own model, which ignores troupe's extra
// fields. docs/run.md lists what goes where.

// teamAgentName is Harbor's agent name of a team whose manifest names no
// condition.
const teamAgentName = "troupe-team"

// TaskID is Harbor's LocalTaskId: the task's folder. troupe runs local
// tasks only, never Harbor's git or package tasks.
type TaskID struct {
	Path string `json:"path"`
}

// AgentInfo is Harbor's AgentInfo. For a team, Name is the manifest's
// condition (Harbor's job statistics group trials by it), Version is
// troupe's, and ModelInfo is the orchestrator's model.
type AgentInfo struct {
	Name      string     `json:"name"`
	Version   string     `json:"version"`
	ModelInfo *ModelInfo `json:"model_info"`
}

// ModelInfo is Harbor's ModelInfo: the upstream model and the wire format
// it is reached by (openai, anthropic, mock), or "unknown". Harbor's
// releases before May 2026 require a provider, so it is never null.
type ModelInfo struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
}

// TrialConfig is Harbor's TrialConfig: the trial as Harbor would have been
// asked to run it. Fields troupe has no counterpart for are left out and
// take Harbor's defaults; job_id among them, since Harbor's is a UUID and
// troupe's is not (config.json has it).
type TrialConfig struct {
	Task      TaskConfig `json:"task"`
	TrialName string     `json:"trial_name"`
	// TrialsDir is the folder holding the trial folder: the job's.
	TrialsDir string `json:"trials_dir"`
	// TimeoutMultiplier is --timeout-multiplier, 1 when unset.
	TimeoutMultiplier float64           `json:"timeout_multiplier"`
	Agent             AgentConfig       `json:"agent"`
	Environment       EnvironmentConfig `json:"environment"`
	Verifier          VerifierConfig    `json:"verifier"`
}

// TaskConfig is Harbor's TaskConfig of a local task: its folder, and the
// task's source when task.toml names one. Harbor refuses a name beside a
// path, so the task's org/name is not repeated here.
type TaskConfig struct {
	Path   string  `json:"path"`
	Source *string `json:"source"`
}

// AgentConfig is Harbor's AgentConfig of a team. ModelName is the
// orchestrator's endpoint as the manifest names it (Harbor's -m);
// MaxTimeoutSec is the manifest's trial timeout, which caps the task's
// agent timeout as Harbor's max_timeout_sec does; Kwargs names the
// condition.
type AgentConfig struct {
	Name          string            `json:"name"`
	ModelName     *string           `json:"model_name"`
	MaxTimeoutSec *float64          `json:"max_timeout_sec"`
	Kwargs        map[string]string `json:"kwargs"`
}

// EnvironmentConfig is Harbor's EnvironmentConfig: troupe's runtime is
// Docker, the container is always removed, and the manifest's environment
// overrides are Harbor's.
type EnvironmentConfig struct {
	Type              string `json:"type"`
	ForceBuild        bool   `json:"force_build"`
	Delete            bool   `json:"delete"`
	OverrideCPUs      *int64 `json:"override_cpus"`
	OverrideMemoryMB  *int64 `json:"override_memory_mb"`
	OverrideStorageMB *int64 `json:"override_storage_mb"`
}

// VerifierConfig is Harbor's VerifierConfig: troupe always runs the
// task's verifier, with the task's timeout.
type VerifierConfig struct {
	Disable bool `json:"disable"`
}

// newResult is a trial's result as Run starts it: what the trial is, in
// troupe's terms and Harbor's. Run fills in the rest as the trial goes. id
// is troupe's own id of the trial.
func newResult(env *Env, spec Spec, id string, start time.Time) *Result {
	m := spec.Team.Manifest
	dir := absPath(spec.Dir)
	var source *string
	if spec.Task.Source != "" {
		source = &spec.Task.Source
	}
	return &Result{
		ID: newUUID(), TrialID: id, TrialName: spec.Name, TrialURI: fileURI(dir),
		TaskName: spec.Task.Name, TaskID: TaskID{Path: spec.Task.Dir}, TaskPath: spec.Task.Dir, Source: source, TaskChecksum: spec.Task.Digest,
		Config:    harborConfig(env, spec, dir, source),
		AgentInfo: agentInfo(env, spec.Team, m),
		Attempt:   spec.Attempt, Condition: m.Condition, ManifestPath: spec.ManifestPath, ManifestHash: m.Hash(),
		Version: env.Version, StartedAt: start, AgentUser: string(agentUser(m)), IdentitiesIsolated: agentUser(m) == manifest.Isolated,
		CleanupErrors: []string{},
	}
}

// harborConfig is the trial's Harbor TrialConfig; dir is the trial folder,
// absolute.
func harborConfig(env *Env, spec Spec, dir string, source *string) TrialConfig {
	m := spec.Team.Manifest
	agent := AgentConfig{
		Name:   cmp.Or(m.Condition, teamAgentName),
		Kwargs: map[string]string{"condition": m.Condition, "manifest_sha256": m.Hash()},
	}
	if ep := orchestratorEndpoint(spec.Team); ep != "" {
		agent.ModelName = &ep
	}
	if s := m.TrialBudget.TimeoutSeconds; s > 0 {
		limit := float64(s)
		agent.MaxTimeoutSec = &limit
	}
	multiplier := env.Limits.Multiplier
	if multiplier <= 0 {
		multiplier = 1 // as Limits.scale reads it
	}
	return TrialConfig{
		Task:      TaskConfig{Path: spec.Task.Dir, Source: source},
		TrialName: spec.Name, TrialsDir: filepath.Dir(dir), TimeoutMultiplier: multiplier,
		Agent: agent,
		Environment: EnvironmentConfig{
			Type: "docker", Delete: true,
			OverrideCPUs: m.Environment.OverrideCPUs, OverrideMemoryMB: m.Environment.OverrideMemoryMB, OverrideStorageMB: m.Environment.OverrideStorageMB,
		},
	}
}

// agentInfo is Harbor's AgentInfo of a team.
func agentInfo(env *Env, team *manifest.Team, m *manifest.Manifest) AgentInfo {
	info := AgentInfo{Name: cmp.Or(m.Condition, teamAgentName), Version: cmp.Or(env.Version, "unknown")}
	name := orchestratorEndpoint(team)
	if name == "" {
		return info
	}
	// Harbor's database records a provider it was not told as "unknown".
	info.ModelInfo = &ModelInfo{Name: name, Provider: "unknown"}
	if env.Gateway != nil {
		if ep, ok := env.Gateway.Endpoints.Lookup(name); ok {
			info.ModelInfo = &ModelInfo{Name: cmp.Or(ep.Model, ep.Name, name), Provider: cmp.Or(string(ep.API), "unknown")}
		}
	}
	return info
}

// orchestratorEndpoint is the endpoint the team's orchestrator calls; ""
// if the team has none.
func orchestratorEndpoint(team *manifest.Team) string {
	for _, a := range team.Agents {
		if a.Kind == manifest.Orchestrator {
			return a.Endpoint
		}
	}
	return ""
}

// newExceptionInfo is Harbor's ExceptionInfo of what ended a trial early.
// Harbor's traceback is Python's; troupe's is the error's chain.
func newExceptionInfo(kind ErrorKind, err error, at time.Time) *ExceptionInfo {
	return &ExceptionInfo{ExceptionType: kind, ExceptionMessage: err.Error(), ExceptionTraceback: errorChain(err), OccurredAt: at}
}

// maxChain bounds the links errorChain writes.
const maxChain = 64

// errorChain writes an error and every error it wraps (errors.Unwrap, and
// each of a join), outermost first: its Go type and message, indented by
// depth, the message's further lines two more.
func errorChain(err error) string {
	var b strings.Builder
	links := 0
	var walk func(err error, depth int)
	walk = func(err error, depth int) {
		if err == nil || links == maxChain {
			return
		}
		links++
		indent := strings.Repeat("  ", depth)
		fmt.Fprintf(&b, "%s%T: %s\n", indent, err, strings.ReplaceAll(err.Error(), "\n", "\n"+indent+"  "))
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e, depth+1)
			}
			return
		}
		walk(errors.Unwrap(err), depth+1)
	}
	walk(err, 0)
	return b.String()
}

// newUUID returns a random (version 4) UUID in its canonical form.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])         // never fails: crypto/rand crashes the program instead
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant of RFC 9562
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// absPath is path made absolute; as given if the working folder is gone.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// fileURI is the file:// URI of an absolute path, as Python's
// Path.as_uri writes it.
func fileURI(path string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
}
