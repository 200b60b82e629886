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
	var source *string
	if spec.Task.Source != "" {
		source = &spec.Task.Source
	}
	return &trialdir.TrialResult{
		ID: newUUID(), TrialID: id, TrialName: spec.Name, TrialURI: fileURI(dir),
		TaskName: spec.Task.Name, TaskID: trialdir.TaskID{Path: spec.Task.Dir}, TaskPath: spec.Task.Dir, Source: source, TaskChecksum: spec.Task.Digest,
		Config:    harborConfig(env, spec, dir, source),
		AgentInfo: agentInfo(env, spec.Team, m),
		Attempt:   spec.Attempt, Condition: m.Condition, ManifestPath: spec.ManifestPath, ManifestHash: m.Hash(),
		Version: env.Version, StartedAt: start, AgentUser: string(agentUser(m)), IdentitiesIsolated: agentUser(m) == manifest.Isolated,
		CleanupErrors: []string{},
	}
}

// harborConfig is the trial's Harbor TrialConfig; dir is the trial folder,
// absolute.
func harborConfig(env *Env, spec Spec, dir string, source *string) trialdir.TrialConfig {
	m := spec.Team.Manifest
	agent := trialdir.AgentConfig{
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
	return trialdir.TrialConfig{
		Task:      trialdir.TaskConfig{Path: spec.Task.Dir, Source: source},
		TrialName: spec.Name, TrialsDir: filepath.Dir(dir), TimeoutMultiplier: multiplier,
		Agent: agent,
		Environment: trialdir.EnvironmentConfig{
			Type: "docker", Delete: true,
			OverrideCPUs: m.Environment.OverrideCPUs, OverrideMemoryMB: m.Environment.OverrideMemoryMB, OverrideStorageMB: m.Environment.OverrideStorageMB,
		},
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
