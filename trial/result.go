package trial

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/troupebench/troupe/internal/atomicfile"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/runtime/tunnel"
	"github.com/troupebench/troupe/trial/outcome"
)

// Reason is why the agents' work ended (step 7 of a trial).
type Reason string

// The completion reasons.
const (
	DeclaredDone    Reason = "declared_done"
	Deadline        Reason = "deadline"
	BudgetExhausted Reason = "budget_exhausted"
	AgentsExited    Reason = "agents_exited"
	Cancelled       Reason = "cancelled"
	InfraError      Reason = "infra_error"
)

// Timing is one phase's span, as Harbor records it.
type Timing struct {
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// AgentResult is Harbor's token and cost totals of a trial.
type AgentResult struct {
	NInputTokens  int64   `json:"n_input_tokens"`
	NCacheTokens  int64   `json:"n_cache_tokens"`
	NOutputTokens int64   `json:"n_output_tokens"`
	CostUSD       float64 `json:"cost_usd"`
	NCalls        int64   `json:"n_calls"`
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
	// chain (errorChain); Harbor requires the field, so it is written even
	// when empty.
	ExceptionTraceback string    `json:"exception_traceback"`
	OccurredAt         time.Time `json:"occurred_at"`
}

// AgentRecord is one agent of the trial: who it was and what it used.
type AgentRecord struct {
	ID       string `json:"id"`
	ClassID  string `json:"class_id"`
	Kind     string `json:"kind"`
	Role     string `json:"role"`
	Endpoint string `json:"endpoint"`
	// Stack is the program the agent ran, and StackDigest its build (its
	// files, command and environment: package stack).
	Stack       string           `json:"stack,omitempty"`
	StackDigest string           `json:"stack_digest,omitempty"`
	Pubkey      string           `json:"pubkey"`
	UID         int              `json:"uid"`
	Usage       modelcall.Totals `json:"usage"`
	// ExitCode is the agent process's exit status; nil if it was still
	// running when the trial ended (the sweep ended it).
	ExitCode *int `json:"exit_code"`
	// BudgetExhausted names the agent budget that was spent, if any.
	BudgetExhausted string `json:"budget_exhausted,omitempty"`
}

// RelayCounts are the channel's counters.
type RelayCounts struct {
	Events            int `json:"events"`
	IgnoredDone       int `json:"ignored_done"`
	Refusals          int `json:"refusals"`
	IdentityConflicts int `json:"identity_conflicts"`
}

// Done is the orchestrator's DONE: message.
type Done struct {
	EventID string    `json:"event_id"`
	Content string    `json:"content"`
	At      time.Time `json:"at"`
}

// Result is a trial's result.json: a Harbor TrialResult (harbor.go) plus
// the team's fields, which Harbor ignores.
type Result struct {
	// ID is Harbor's id of the trial: a random UUID (version 4).
	ID string `json:"id"`
	// TrialID is troupe's own id of the trial, <trial name>-<8 hex>: the
	// relay channel's id and the container's label.
	TrialID   string `json:"troupe_trial_id"`
	TrialName string `json:"trial_name"`
	// TrialURI is the file:// URI of the trial folder.
	TrialURI string `json:"trial_uri"`
	TaskName string `json:"task_name"`
	TaskID   TaskID `json:"task_id"`
	TaskPath string `json:"task_path"`
	// Source is task.toml's source; nil without one.
	Source       *string     `json:"source"`
	TaskChecksum string      `json:"task_checksum"`
	Config       TrialConfig `json:"config"`
	AgentInfo    AgentInfo   `json:"agent_info"`

	Attempt      int       `json:"attempt"`
	Condition    string    `json:"condition"`
	ManifestPath string    `json:"manifest_path"`
	ManifestHash string    `json:"manifest_sha256"`
	Version      string    `json:"troupe_version"`
	StartedAt    time.Time `json:"started_at"`
	FinishedAt   time.Time `json:"finished_at"`

	EnvironmentSetup Timing `json:"environment_setup"`
	AgentSetup       Timing `json:"agent_setup"`
	AgentExecution   Timing `json:"agent_execution"`
	Verifier         Timing `json:"verifier"`
	Teardown         Timing `json:"teardown"`

	CompletionReason Reason          `json:"completion_reason"`
	Outcome          outcome.Outcome `json:"outcome"`
	Reward           *float64        `json:"reward"`
	VerifierResult   *VerifierResult `json:"verifier_result"`
	AgentResult      AgentResult     `json:"agent_result"`
	ExceptionInfo    *ExceptionInfo  `json:"exception_info"`

	// AgentUser is isolated (each agent its own uid) or root; with root,
	// identities were not isolated.
	AgentUser          string        `json:"agent_user"`
	IdentitiesIsolated bool          `json:"identities_isolated"`
	Agents             []AgentRecord `json:"agents"`
	Done               *Done         `json:"done"`
	Relay              RelayCounts   `json:"relay"`
	// Tunnel counts the connections the agents opened through the tunnel,
	// and those refused or closed for their silence (docs/run.md, "Bounds").
	Tunnel *tunnel.Stats `json:"tunnel,omitempty"`
	// TrialBudgetExhausted is set when the trial's max_cost_usd was spent.
	TrialBudgetExhausted bool           `json:"trial_budget_exhausted,omitempty"`
	Sweep                *inside.Report `json:"sweep"`
	// ServiceSweeps are the sweeps of the task's compose services, one a
	// service that ran: what the agents left there, ended before the
	// verifier while the service's own processes ran on.
	ServiceSweeps []ServiceSweep `json:"service_sweeps,omitempty"`
	// LimitsNotEnforced names the task's limits (storage_mb) that this
	// runtime could not enforce, as the trial warned before its agents
	// started; LimitsNote says why.
	LimitsNotEnforced []string `json:"limits_not_enforced,omitempty"`
	LimitsNote        string   `json:"limits_note,omitempty"`
	// RemovedBeforeVerifier lists what the agents left in /tests or
	// /logs/verifier, removed before the verifier ran.
	RemovedBeforeVerifier []string `json:"removed_before_verifier,omitempty"`
	// SystemChecked says the container was compared with its image before
	// the verifier (a runtime that can diff: Docker's).
	SystemChecked bool `json:"system_checked,omitempty"`
	// SystemChanges names the system files (shells, interpreters,
	// libraries, /tests: outside the task's working folders) found changed
	// before the verifier, as "kind path"; VerdictUntrusted is then set:
	// the verdict may be the agents' doing (docs/run.md, step 9).
	SystemChanges    []string `json:"system_changes,omitempty"`
	VerdictUntrusted bool     `json:"verdict_untrusted,omitempty"`
	// Truncated maps each file of the trial folder that was cut to its
	// bound to the bytes it dropped (docs/run.md, "Bounds").
	Truncated     map[string]int64 `json:"truncated,omitempty"`
	CleanupErrors []string         `json:"cleanup_errors"`
	// Timeouts are the phase limits the trial ran with, in seconds.
	Timeouts map[string]float64 `json:"timeouts"`
	// Network says what the agents and the verifier were given, and what
	// the allowlist proxy let through and refused.
	Network *NetworkRecord `json:"network"`
	// Installs are the stacks' install scripts: run, or their image reused.
	Installs []InstallRecord `json:"installs,omitempty"`
	// Replay is set when the trial replayed a recorded one: what was
	// played, and where an agent left its recording.
	Replay *ReplayRecord `json:"replay,omitempty"`
}

// ServiceSweep is the sweep of one compose service (a sidecar).
type ServiceSweep struct {
	Service string `json:"service"`
	inside.Report
}

// Finished reports whether a result is final for resuming: scored trials and
// verifier errors are kept; infrastructure failures and cancelled trials are
// redone.
func (r *Result) Finished() bool {
	return r.Outcome == outcome.Passed || r.Outcome == outcome.Failed || r.Outcome == outcome.VerifierError
}

// writeJSON and writeFileAtomic write a file of the trial folder whole or
// not at all (package atomicfile).
var (
	writeJSON       = atomicfile.WriteJSON
	writeFileAtomic = atomicfile.Write
)

// ReadResult reads a trial's result.json.
func ReadResult(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}
