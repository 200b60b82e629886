package trial

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trialdir"
)

// The trial's Harbor fields of its result.json (trialdir's harbor.go):
// what the trial is, in Harbor's terms. docs/run.md lists what goes where.

// teamAgentName is Harbor's agent name of a team whose manifest names no
// condition.
const teamAgentName = "troupe-team"

// newResult is a trial's result as Run starts it: what the trial is, in
// troupe's terms and Harbor's. Run fills in the rest as the trial goes. id
// is troupe's own id of the trial.
func newResult(env *Env, spec Spec, id string, start time.Time) *trialdir.TrialResult {
	m := spec.Team.Manifest
	dir := absPath(spec.Dir)
	taskID, taskConfig, dataset := HarborTask(spec.Task)
	return &trialdir.TrialResult{
		ID: trialdir.NewUUID(), TrialID: id, TrialName: spec.Name, TrialURI: fileURI(dir),
		TaskName: spec.Task.Name, TaskID: taskID, TaskPath: spec.Task.Dir, Source: taskConfig.Source, TaskChecksum: spec.Task.Digest,
		Config:    harborConfig(env, spec, dir, taskConfig),
		AgentInfo: agentInfo(env, spec.Team, m),
		Attempt:   spec.Attempt, Condition: m.Condition, ManifestPath: spec.ManifestPath, ManifestHash: m.Hash(),
		Version: env.Version, StartedAt: start, AgentUser: string(agentUser(m)), IdentitiesIsolated: agentUser(m) == manifest.Isolated,
		CleanupErrors: []string{},
		Dataset:       dataset,
	}
}

// HarborTask is the task as Harbor names it (the trial's, and the job's
// list of its tasks): a local task is its folder, and its source
// task.toml's; a task of a registry's dataset is a GitTaskId (its
// repository, pinned commit and path there) whose source is the dataset's
// name, as Harbor's DatasetConfig resolves it. dataset says the same, with
// the dataset's version and registry, for troupe's readers; nil for a
// local task.
func HarborTask(t *task.Task) (id trialdir.TaskID, config trialdir.TaskConfig, dataset *trialdir.DatasetTask) {
	o := t.Origin
	if o == nil {
		var source *string
		if t.Source != "" {
			source = &t.Source
		}
		return trialdir.TaskID{Path: t.Dir}, trialdir.TaskConfig{Path: t.Dir, Source: source}, nil
	}
	name := o.Name
	id = trialdir.TaskID{GitURL: o.GitURL, GitCommitID: o.GitCommit, Path: o.Path}
	config = trialdir.TaskConfig{Path: o.Path, GitURL: o.GitURL, GitCommitID: o.GitCommit, Source: &name}
	return id, config, &trialdir.DatasetTask{Name: o.Name, Version: o.Version, Registry: o.Registry, GitURL: o.GitURL, GitCommitID: o.GitCommit, Path: o.Path}
}

// harborConfig is the trial's Harbor TrialConfig; dir is the trial folder,
// absolute.
func harborConfig(env *Env, spec Spec, dir string, taskConfig trialdir.TaskConfig) trialdir.TrialConfig {
	return trialdir.TrialConfig{
		Task:      taskConfig,
		TrialName: spec.Name, TrialsDir: filepath.Dir(dir), TimeoutMultiplier: env.Limits.TimeoutMultiplier(),
		JobID:       spec.JobUUID,
		Agent:       HarborAgent(spec.Team),
		Environment: HarborEnvironment(spec.Team.Manifest),
	}
}

// TimeoutMultiplier is Harbor's timeout_multiplier of the limits:
// Multiplier, 1 when unset (as scale reads it).
func (l Limits) TimeoutMultiplier() float64 {
	if l.Multiplier <= 0 {
		return 1
	}
	return l.Multiplier
}

// HarborAgent is Harbor's AgentConfig of a team: the trial's, and the
// job's list of its agents. ModelName is the orchestrator's endpoint.
func HarborAgent(team *manifest.Team) trialdir.AgentConfig {
	m := team.Manifest
	agent := trialdir.AgentConfig{
		Name:   cmp.Or(m.Condition, teamAgentName),
		Kwargs: map[string]string{"condition": m.Condition, "manifest_sha256": m.Hash()},
	}
	if ep := orchestratorEndpoint(team); ep != "" {
		agent.ModelName = &ep
	}
	if s := m.TrialBudget.TimeoutSeconds; s > 0 {
		limit := float64(s)
		agent.MaxTimeoutSec = &limit
	}
	return agent
}

// HarborEnvironment is Harbor's EnvironmentConfig of a manifest's trials:
// Docker, removed at the end, with the manifest's overrides.
func HarborEnvironment(m *manifest.Manifest) trialdir.EnvironmentConfig {
	return trialdir.EnvironmentConfig{
		Type: "docker", Delete: true,
		OverrideCPUs: m.Environment.OverrideCPUs, OverrideMemoryMB: m.Environment.OverrideMemoryMB, OverrideStorageMB: m.Environment.OverrideStorageMB,
	}
}

// agentInfo is Harbor's AgentInfo of a team.
func agentInfo(env *Env, team *manifest.Team, m *manifest.Manifest) trialdir.AgentInfo {
	info := trialdir.AgentInfo{Name: cmp.Or(m.Condition, teamAgentName), Version: cmp.Or(env.Version, "unknown")}
	name := orchestratorEndpoint(team)
	if name == "" {
		return info
	}
	// Harbor's database records a provider it was not told as "unknown".
	info.ModelInfo = &trialdir.ModelInfo{Name: name, Provider: "unknown"}
	if env.Gateway != nil {
		if ep, ok := env.Gateway.Endpoints.Lookup(name); ok {
			info.ModelInfo = &trialdir.ModelInfo{Name: cmp.Or(ep.Model, ep.Name, name), Provider: cmp.Or(string(ep.API), "unknown")}
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
func newExceptionInfo(kind ErrorKind, err error, at time.Time) *trialdir.ExceptionInfo {
	return &trialdir.ExceptionInfo{ExceptionType: kind, ExceptionMessage: err.Error(), ExceptionTraceback: errorChain(err), OccurredAt: at}
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
