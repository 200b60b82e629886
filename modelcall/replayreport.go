package modelcall

import (
	"fmt"
	"time"
)

// A replay (package llm) answers each agent's n-th call with the n-th
// answer of a recorded trial, while the agent asks what it asked then.
// This is what a replay's report says, as result.json keeps it: by agent,
// what was replayed, and where each agent first diverged.

// DivergencePolicy is what a replay does with an agent's calls from its
// first divergence on.
type DivergencePolicy string

// The divergence policies.
const (
	// DivergeStop answers the call with an error and ends the trial, with
	// no verdict: what follows would not be the recording's. Every
	// agent's calls from then on are refused, so the report names the
	// one divergence that ended it.
	DivergeStop DivergencePolicy = "stop"
	// DivergeLive sends the agent's calls to its endpoint, as a run would:
	// the replay goes on, live, from there (and costs from there).
	DivergeLive DivergencePolicy = "live"
	// DivergeMockError answers the agent's calls with an error, and the
	// trial goes on: how the team copes with a model that fails.
	DivergeMockError DivergencePolicy = "mock-error"
)

// ParseDivergencePolicy reads --on-divergence.
func ParseDivergencePolicy(s string) (DivergencePolicy, error) {
	switch p := DivergencePolicy(s); p {
	case DivergeStop, DivergeLive, DivergeMockError:
		return p, nil
	}
	return "", fmt.Errorf("%q is not a divergence policy: give stop (end the trial at the first divergence), live (send the agent's calls upstream from there) or mock-error (answer them with an error and go on)", s)
}

// Divergence is an agent's first call that left its recording.
type Divergence struct {
	Agent string    `json:"agent"`
	Call  int64     `json:"call"`
	Time  time.Time `json:"time"`
	// Why says how it differs; Diff shows the request against the
	// recorded one (unified, the recording first), when there is one.
	Why  string `json:"why"`
	Diff string `json:"diff,omitempty"`
}

// ReplayReport is what a replay played, by agent, and where it diverged.
type ReplayReport struct {
	OnDivergence DivergencePolicy `json:"on_divergence"`
	Agents       []ReplayAgent    `json:"agents"`
	// Divergences are the agents' first divergences, in time order.
	Divergences []Divergence `json:"divergences"`
}

// ReplayAgent counts one agent's calls in a replay.
type ReplayAgent struct {
	ID       string `json:"id"`
	Recorded int    `json:"calls_recorded"`
	// Replayed were answered from the recording, Live by the endpoint
	// after a divergence, Refused with an error after one (the agent's
	// own, or the one that stopped the replay).
	Replayed int `json:"calls_replayed"`
	Live     int `json:"calls_live"`
	Refused  int `json:"calls_refused"`
	// LiveCostUSD is what the live calls cost; replayed calls are metered
	// as recorded, so budgets act as they did, but cost nothing.
	LiveCostUSD USD `json:"live_cost_usd"`
	// NotInRoster: the recording has calls of an agent the replay's
	// roster lacks.
	NotInRoster bool `json:"not_in_roster,omitempty"`
}

// Reproduced says whether every call of the replay was its recording's:
// no agent diverged. (An agent may still have asked fewer calls than it
// recorded: a call made as the trial ended, in one run and not in the
// other, is no divergence.)
func (r *ReplayReport) Reproduced() bool {
	return r != nil && len(r.Divergences) == 0
}
