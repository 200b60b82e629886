package trialdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/runtime/tunnel"
	"github.com/troupebench/troupe/trial/outcome"
)

// TrialResult is a trial's result.json (Result): a Harbor TrialResult
// (harbor.go) plus the team's fields, which Harbor ignores. The trial
// fills it and writes it (WriteResult); the job, troupe compare and view,
// the ATIF export and replays read it (ReadResult, DecodeResult). Fields
// are written in the order they are declared here, and nested records
// where they are embedded: the order is part of the format.
type TrialResult struct {
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
	// Source is, as Harbor writes it, the name of the dataset the task
	// came from (Dataset); else task.toml's source; nil without either.
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
	// StepResults are a multi-step trial's steps, in order (steps.go);
	// its VerifierResult and Reward are rolled up from theirs.
	StepResults []StepResult `json:"step_results,omitempty"`

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
	// Services is what the sweep did with the processes the agents left
	// running: "sweep" (ended) or "keep" (those detached from the agents'
	// execs ran on into the verifier: the sweep report's kept lists them,
	// and AgentCodeDuringVerifier is set when there were any: the verdict
	// may be their doing).
	Services                string `json:"services,omitempty"`
	AgentCodeDuringVerifier bool   `json:"agent_code_during_verifier,omitempty"`
	// Entrypoint is the image's own first process (its ENTRYPOINT, with
	// Harbor's command), which troupe init started: nil when the image
	// has none. Its output is the trial folder's EntrypointLog.
	Entrypoint *inside.MainStatus `json:"entrypoint,omitempty"`
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

	// Where the task came from, beside Harbor's task_id, source and
	// config.task.

	// Dataset is set for a task of a registry's dataset (--dataset).
	Dataset *DatasetTask `json:"dataset,omitempty"`
}

// Reason is why the agents' work ended (step 7 of a trial): the result's
// completion_reason. The trial names its values (trial.DeclaredDone and
// the others); readers compare with those or print it.
type Reason string

// Finished reports whether a result is final for resuming: scored trials and
// verifier errors are kept; infrastructure failures and cancelled trials are
// redone.
func (r *TrialResult) Finished() bool {
	return r.Outcome == outcome.Passed || r.Outcome == outcome.Failed || r.Outcome == outcome.VerifierError
}

// MaxResult bounds a result.json when it is read: troupe writes a few
// kilobytes, and one of gigabytes (a folder an agent or a hand filled) is
// no trial's.
const MaxResult = 16 << 20

// ErrTooBig is a result.json over MaxResult bytes.
var ErrTooBig = errors.New("too big to be troupe's")

// WriteResult writes a result as result.json holds it: indented JSON with
// a final newline. The trial writes the file whole (atomically) from
// what this wrote, once it has scrubbed it of secrets.
func WriteResult(w io.Writer, r *TrialResult) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// DecodeResult reads a result.json from r, which holds nothing else. One
// over MaxResult bytes is refused with ErrTooBig: before it is read when
// r tells its size (a file), so that a huge one costs nothing.
func DecodeResult(r io.Reader) (*TrialResult, error) {
	if f, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if info, err := f.Stat(); err == nil && info.Size() > MaxResult {
			return nil, tooBig()
		}
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxResult+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxResult {
		return nil, tooBig()
	}
	var res TrialResult
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func tooBig() error { return fmt.Errorf("over %d bytes: %w", MaxResult, ErrTooBig) }

// ReadResult reads the result.json at path (a trial folder's Result).
// An error opening it is the file system's (fs.ErrNotExist for a trial
// without one); one reading it names the path.
func ReadResult(path string) (*TrialResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := DecodeResult(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}
