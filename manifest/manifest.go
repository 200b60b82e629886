package manifest

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/troupebench/troupe/internal/yaml11"
)

// Manifest is one condition: a roster and everything that must stay fixed
// for its results to be comparable. It is immutable after Parse.
type Manifest struct {
	// SchemaVersion is always "1".
	SchemaVersion string
	// Condition names the roster in reports; results pool by Hash, not by it.
	Condition string
	Roster    []AgentClass
	// Prices per endpoint name; it may price endpoints the roster does not use.
	Prices      map[string]Price
	TrialBudget TrialBudget
	Environment Environment
	// Metadata is free-form and hashed: JSON-shaped values (json.Number for
	// integers, float64 for floats).
	Metadata map[string]any
	// AgentUser says how agents run inside the container; a troupe addition.
	AgentUser AgentUser

	file      string
	canonical []byte
	hash      string
}

// Kind is an agent's place in the team.
type Kind string

// The two kinds; a roster has exactly one orchestrator.
const (
	Orchestrator Kind = "orchestrator"
	Worker       Kind = "worker"
)

// Harness is the agent program an agent runs: the name of a stack (package
// stack). It is part of the condition, so it is kept and hashed.
type Harness string

// The original system's harnesses; troupe runs any stack it is given.
const (
	BuzzAgent Harness = "buzz-agent"
	Goose     Harness = "goose"
	Codex     Harness = "codex"
)

// AgentUser says whether each agent runs as its own non-root user (isolated:
// one agent cannot read another's key or speak for it) or all as root.
type AgentUser string

// The agent user modes; the zero value of a parsed manifest is Isolated.
const (
	Isolated AgentUser = "isolated"
	Root     AgentUser = "root"
)

// AgentClass is a homogeneous group of Count agents, named <ID>-1 … <ID>-<Count>.
type AgentClass struct {
	ID   string
	Kind Kind
	// Role is shown to teammates (lead, implementer, critic, ...).
	Role  string
	Count int
	// Endpoint names the model endpoint: a key of Prices and of the endpoint
	// configuration; it is what the agent asks the gateway for.
	Endpoint string
	// ModelRevision is recorded only.
	ModelRevision string
	Harness       Harness
	// Prompt is the persona prompt the agent's system prompt starts with.
	Prompt ArtifactRef
	// Persona and Skills are pinned and hashed; troupe does not load them
	// into the prompt. Persona is nil when unset.
	Persona               *ArtifactRef
	Skills                []ArtifactRef
	IncludePlatformPrompt bool
	Generation            Generation
	Budget                Budget
	// Concurrency is validated (1..Count) and hashed; troupe does not use it.
	Concurrency int
}

// ArtifactRef pins a file by the SHA-256 of its bytes. Path is relative to
// the artifact root (by default the manifest's folder), or names one of
// troupe's built-in personas as "troupe:<name>".
type ArtifactRef struct {
	Path   string
	SHA256 string

	at place
}

// place is where a pinned reference is written, for errors raised after
// parsing (a missing file, a stale digest).
type place struct {
	key        string // key path, e.g. roster[0].prompt
	path, hash *yaml11.Node
}

// Generation configures the model calls; nil pointers are unset.
type Generation struct {
	MaxOutputTokens     *int64
	ContextWindowTokens *int64
	CompactAtPercent    *int64
	CompactAtTokens     *int64
	// ThinkingEffort is "" when unset (the harness default, medium), else one
	// of none, minimal, low, medium, high, xhigh, max.
	ThinkingEffort string
	// Extra is free-form and hashed, like Manifest.Metadata.
	Extra map[string]any
}

// Budget caps one agent's model use; nil is unlimited.
type Budget struct {
	MaxCalls        *int64
	MaxInputTokens  *int64
	MaxOutputTokens *int64
	MaxCostUSD      *float64
}

// Price is an endpoint's price in USD per million tokens.
type Price struct {
	InputPerMillionUSD       float64
	CachedInputPerMillionUSD float64
	// OutputPerMillionUSD includes reasoning tokens.
	OutputPerMillionUSD float64
	// CacheReadRate is the share of input assumed cached when a response
	// reports no cached count (0 to 1).
	CacheReadRate float64
}

// TrialBudget bounds a whole trial.
type TrialBudget struct {
	TimeoutSeconds int64
	// MaxCostUSD is nil when the trial has no cost cap.
	MaxCostUSD *float64
}

// Environment overrides the task's container resources; nil keeps the
// task's own value. A set value replaces the task's, even when smaller.
type Environment struct {
	OverrideCPUs      *int64
	OverrideMemoryMB  *int64
	OverrideStorageMB *int64
	// OverridePids is a troupe addition; PidsLimit counts threads.
	OverridePids *int64
}

// File is the name the manifest was parsed under.
func (m *Manifest) File() string { return m.file }

// Hash is the condition hash: lower-case hex SHA-256 of Canonical.
func (m *Manifest) Hash() string { return m.hash }

// Canonical returns the canonical JSON bytes the hash is computed over.
func (m *Manifest) Canonical() []byte { return append([]byte(nil), m.canonical...) }

// Agents is the number of agents the roster expands to.
func (m *Manifest) Agents() int {
	n := 0
	for _, c := range m.Roster {
		n += c.Count
	}
	return n
}

// IsSolo reports whether the roster is a single agent.
func (m *Manifest) IsSolo() bool { return m.Agents() == 1 }

// Refs lists every pinned reference with the key path it is written under.
func (m *Manifest) Refs() []NamedRef {
	var out []NamedRef
	for i := range m.Roster {
		c := &m.Roster[i]
		out = append(out, NamedRef{Key: c.Prompt.at.key, Ref: c.Prompt})
		if c.Persona != nil {
			out = append(out, NamedRef{Key: c.Persona.at.key, Ref: *c.Persona})
		}
		for _, s := range c.Skills {
			out = append(out, NamedRef{Key: s.at.key, Ref: s})
		}
	}
	return out
}

// NamedRef is a pinned reference and where in the manifest it is.
type NamedRef struct {
	Key string // e.g. roster[0].prompt
	Ref ArtifactRef
}

// OracleCondition names the condition of Harbor's oracle agent: each
// task's own solution/solve.sh in place of a team (troupe run --oracle).
const OracleCondition = "oracle"

// Oracle is the oracle's manifest: no roster, a day's timeout (the task's
// own agent timeout caps it), and a hash of its own, so that resumed jobs
// and reports treat it as one more condition.
func Oracle() *Manifest {
	m := &Manifest{SchemaVersion: "1", Condition: OracleCondition, Prices: map[string]Price{},
		TrialBudget: TrialBudget{TimeoutSeconds: 24 * 60 * 60}, Metadata: map[string]any{"oracle": true}, AgentUser: Isolated}
	m.canonical = canonicalJSON(m)
	sum := sha256.Sum256(m.canonical)
	m.hash = hex.EncodeToString(sum[:])
	return m
}
