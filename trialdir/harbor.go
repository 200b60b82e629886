package trialdir

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// The parts of a trial's result.json that make it a Harbor TrialResult
// (src/harbor/models/trial/result.py and trial/config.py, Harbor 0.13.1):
// Harbor reads the file with its own model, which ignores troupe's extra
// fields. docs/run.md lists what goes where; package trial fills them
// (trial/harbor.go) and its harbor_test.go checks them against Harbor's
// model.

// TaskID is Harbor's LocalTaskId, the task's folder, or, for a task of a
// registry's dataset, its GitTaskId: the repository, the pinned commit and
// the task's path in it (as Harbor's dataset resolution writes it). troupe
// never runs Harbor's package tasks.
type TaskID struct {
	GitURL      string `json:"git_url,omitempty"`
	GitCommitID string `json:"git_commit_id,omitempty"`
	Path        string `json:"path"`
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
// take Harbor's defaults.
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
	// JobID is Harbor's id of the job (a UUID: the job's result.json id);
	// left out for a trial outside a job.
	JobID string `json:"job_id,omitempty"`
}

// TaskConfig is Harbor's TaskConfig of a local task (its folder), or of a
// registry dataset's task (the repository, the pinned commit, and the
// task's path in the repository, as Harbor's DatasetConfig resolves it).
// Source is the dataset's name, else task.toml's source. Harbor refuses a
// name beside a path, so the task's org/name is not repeated here.
type TaskConfig struct {
	Path        string  `json:"path"`
	GitURL      string  `json:"git_url,omitempty"`
	GitCommitID string  `json:"git_commit_id,omitempty"`
	Source      *string `json:"source"`
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

// Timing is one phase's span, as Harbor records it.
type Timing struct {
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// AgentResult is Harbor's token and cost totals of a trial.
type AgentResult struct {
	NInputTokens  int64         `json:"n_input_tokens"`
	NCacheTokens  int64         `json:"n_cache_tokens"`
	NOutputTokens int64         `json:"n_output_tokens"`
	CostUSD       modelcall.USD `json:"cost_usd"`
	NCalls        int64         `json:"n_calls"`
}

// VerifierResult is Harbor's rewards of a trial.
type VerifierResult struct {
	Rewards map[string]float64 `json:"rewards"`
}

// ExceptionInfo is Harbor's record of what went wrong.
type ExceptionInfo struct {
	ExceptionType    ErrorKind `json:"exception_type"`
	ExceptionMessage string    `json:"exception_message"`
	// ExceptionTraceback is, for want of a Python traceback, the error's
	// chain (the trial's errorChain); Harbor requires the field, so it is
	// written even when empty.
	ExceptionTraceback string    `json:"exception_traceback"`
	OccurredAt         time.Time `json:"occurred_at"`
}

// ErrorKind names what ended a trial early: exception_info's
// exception_type. The trial names its values (trial.ErrProvision and the
// others).
type ErrorKind string

// DatasetConfig is Harbor's DatasetConfig of a registry's dataset, as a
// job's config.json lists those --dataset named: its name and version and
// the registry it is in, a URL (RegistryURL) or a file (RegistryPath).
type DatasetConfig struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	RegistryURL  string `json:"registry_url,omitempty"`
	RegistryPath string `json:"registry_path,omitempty"`
}

// DatasetTask is where a task of a registry's dataset came from: the
// dataset (its name and version, the registry it is in), and the task's
// repository, pinned commit and path in it. Harbor writes the same as a
// GitTaskId and the job's DatasetConfig; troupe writes it whole in the
// trial's result.json and config.json too, so that a trial alone says
// what it ran.
type DatasetTask struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Registry    string `json:"registry"`
	GitURL      string `json:"git_url"`
	GitCommitID string `json:"git_commit_id"`
	Path        string `json:"path"`
}

// NewUUID returns a random (version 4) UUID in its canonical form: Harbor's
// id of a trial (result.json's id) and of a job (the job's result.json id,
// its trials' job_id).
func NewUUID() string {
	var b [16]byte
	rand.Read(b[:])         // never fails: crypto/rand crashes the program instead
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant of RFC 9562
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// IsUUID reports whether s is a UUID in its canonical form, as NewUUID and
// Python's str(uuid) write it.
func IsUUID(s string) bool { return uuidForm.MatchString(s) }

var uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
