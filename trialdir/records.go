package trialdir

import (
	"time"

	"github.com/troupebench/troupe/egress"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/trial/outcome"
)

// The team's records in a trial's result.json, beside Harbor's fields:
// who the agents were and what they used, the channel, the sweeps, the
// networks, the stacks' installs, a replay.

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

// Member is the agent as the roster (members.json) lists it: what readers
// of a trial from before members.json, or of a finished one, take the team
// from.
func (a AgentRecord) Member() Member {
	return Member{ID: a.ID, Role: a.Role, Kind: a.Kind, Pubkey: a.Pubkey}
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

// ServiceSweep is the sweep of one compose service (a sidecar).
type ServiceSweep struct {
	Service string `json:"service"`
	inside.Report
}

// NetworkPolicy is the user's say over trial networks (--network), as the
// result records it. The trial names its values (trial.NetworkTask,
// trial.NetworkNone) and reads --network.
type NetworkPolicy string

// NetworkRecord is result.json's network: what each phase asked and was
// given, and the allowlist proxy's counts.
type NetworkRecord struct {
	Policy   NetworkPolicy `json:"policy"`
	Agents   PhaseNetwork  `json:"agents"`
	Verifier PhaseNetwork  `json:"verifier"`
	// Isolation is how the runtime cut off the phases without network:
	// what it enforced, and what it only asked of the platform.
	Isolation *runtime.Isolation `json:"isolation,omitempty"`
	// Egress is what the allowlist proxy let through and refused; nil
	// when no phase had an allowlist.
	Egress *egress.Stats `json:"egress,omitempty"`
}

// PhaseNetwork is one phase's network: what the task asked, what the
// phase was given.
type PhaseNetwork struct {
	Asked Network `json:"asked"`
	Given Network `json:"given"`
}

// Network is a phase's network as the result records it: Harbor's
// network_mode (public, no-network, allowlist) and, for an allowlist, the
// hosts. It has a task's network's shape (package task), and is the
// result's own: the trial converts one into the other, so that reading a
// result needs nothing of the task loader.
type Network struct {
	Mode         string   `json:"mode"`
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
}

// InstallRecord is result.json's record of a stack's install script.
type InstallRecord struct {
	Stack       string `json:"stack"`
	StackDigest string `json:"stack_digest"`
	// Image is what the install made, or an earlier trial's install of the
	// same stack on the same image: the trial container starts from it.
	Image string `json:"image,omitempty"`
	// Cached: an earlier install's image was used; the script did not run.
	Cached bool `json:"cached"`
	// Network is what the script had (the agents' network), when it ran.
	Network *Network `json:"network,omitempty"`
	// ExitCode is the script's exit status, when it ended.
	ExitCode   *int    `json:"exit_code,omitempty"`
	TimeoutSec float64 `json:"timeout_sec"`
	// DurationSec is how long it took to have the image: running the
	// script and committing its container, or finding the image made.
	DurationSec float64 `json:"duration_sec"`
	// Log is the script's output in the trial folder, when it ran.
	Log string `json:"log,omitempty"`
}

// ReplayRecord is result.json's account of a replay.
type ReplayRecord struct {
	// Source is the recorded trial's folder; RecordedOutcome its outcome.
	Source          string          `json:"source"`
	RecordedOutcome outcome.Outcome `json:"recorded_outcome"`
	*modelcall.ReplayReport
}
