// Package contract is the stack contract: the TROUPE_* variables and
// files every team member is given (docs/stacks.md), as the trial sets
// them (Values) and as a member reads them back (Read). It is the
// in-container side's only view of troupe, so it depends on nothing of the
// host: the reference agent and the ACP bridge read the contract from
// here, and package stack maps it to a stack's own names. Nothing else
// spells the contract.
package contract

import (
	"encoding/json"
	"path"
	"strconv"
	"strings"
	"time"
)

// The contract's environment variables.
const (
	EnvRelayURL         = "TROUPE_RELAY_URL"
	EnvPrivateKeyFile   = "TROUPE_PRIVATE_KEY_FILE"
	EnvLLMTokenFile     = "TROUPE_LLM_TOKEN_FILE"
	EnvChannel          = "TROUPE_CHANNEL"
	EnvLLMBaseURL       = "TROUPE_LLM_BASE_URL"
	EnvModel            = "TROUPE_MODEL"
	EnvSystemPromptFile = "TROUPE_SYSTEM_PROMPT_FILE"
	EnvMaxRounds        = "TROUPE_MAX_ROUNDS"
	EnvDeadline         = "TROUPE_DEADLINE"
	EnvWorkdir          = "TROUPE_WORKDIR"
	// EnvAgentID is optional: the agent's name for its logs. An agent finds
	// its id in the channel's member list anyway.
	EnvAgentID = "TROUPE_AGENT_ID"

	// The manifest's generation settings of the agent's class, each set
	// only when the manifest sets it: they are part of the condition, so
	// an agent must apply them (or its stack map them to its own).
	EnvThinkingEffort      = "TROUPE_THINKING_EFFORT"
	EnvMaxOutputTokens     = "TROUPE_MAX_OUTPUT_TOKENS"
	EnvContextWindowTokens = "TROUPE_CONTEXT_WINDOW_TOKENS"
	EnvCompactAtPercent    = "TROUPE_COMPACT_AT_PERCENT"
	EnvCompactAtTokens     = "TROUPE_COMPACT_AT_TOKENS"
	// EnvGenerationExtra is generation.extra as a JSON object: parameters
	// an agent adds to its model requests as they are.
	EnvGenerationExtra = "TROUPE_GENERATION_EXTRA"
)

// Where a trial puts each agent's files: Dir(id) holds its key, token and
// prompt, readable by its uid alone; Home(id) is its HOME.
const (
	SecretsDir = "/run/troupe/agents"
	HomesDir   = "/run/troupe/home"
	KeyFile    = "key"
	TokenFile  = "token"
	PromptFile = "system-prompt.md"
)

// DefaultMaxRounds bounds the model calls of one turn when
// TROUPE_MAX_ROUNDS is 0 or unset.
const DefaultMaxRounds = 40

// Dir is the folder of an agent's secrets and prompt.
func Dir(agentID string) string { return path.Join(SecretsDir, agentID) }

// Home is an agent's HOME.
func Home(agentID string) string { return path.Join(HomesDir, agentID) }

// Values are one agent's contract in a trial.
type Values struct {
	AgentID    string
	RelayURL   string
	Channel    string
	LLMBaseURL string // OpenAI-compatible, ending in /v1
	Model      string
	Workdir    string
	Deadline   time.Time
	// MaxRounds is the model calls allowed per turn (the manifest's
	// budget.max_calls, as the original system used it); 0 leaves the
	// agent's default.
	MaxRounds int
	// Generation is the manifest's generation settings of the agent.
	Generation Generation
	// MCPServers and SkillsDir are the task's (EnvMCPServers,
	// EnvSkillsDir); unset when the task has none.
	MCPServers []MCPServer
	SkillsDir  string
}

// Generation is a roster class's generation settings; zero values are
// unset.
type Generation struct {
	ThinkingEffort                                                          string
	MaxOutputTokens, ContextWindowTokens, CompactAtPercent, CompactAtTokens int64
	Extra                                                                   map[string]any
}

// Env is the contract's environment for v: every TROUPE_* variable, and
// HOME.
func (v Values) Env() map[string]string {
	dir := Dir(v.AgentID)
	env := map[string]string{
		EnvRelayURL:         v.RelayURL,
		EnvPrivateKeyFile:   path.Join(dir, KeyFile),
		EnvLLMTokenFile:     path.Join(dir, TokenFile),
		EnvChannel:          v.Channel,
		EnvLLMBaseURL:       v.LLMBaseURL,
		EnvModel:            v.Model,
		EnvSystemPromptFile: path.Join(dir, PromptFile),
		EnvDeadline:         v.Deadline.UTC().Format(time.RFC3339Nano),
		EnvWorkdir:          v.Workdir,
		EnvAgentID:          v.AgentID,
		"HOME":              Home(v.AgentID),
	}
	if v.MaxRounds > 0 {
		env[EnvMaxRounds] = strconv.Itoa(v.MaxRounds)
	}
	for name, value := range v.Generation.Env() {
		env[name] = value
	}
	if servers := encodeMCPServers(v.MCPServers); servers != "" {
		env[EnvMCPServers] = servers
	}
	if v.SkillsDir != "" {
		env[EnvSkillsDir] = v.SkillsDir
	}
	return env
}

// Env is the generation settings' variables, those set.
func (g Generation) Env() map[string]string {
	env := map[string]string{}
	if g.ThinkingEffort != "" {
		env[EnvThinkingEffort] = g.ThinkingEffort
	}
	for name, n := range map[string]int64{EnvMaxOutputTokens: g.MaxOutputTokens, EnvContextWindowTokens: g.ContextWindowTokens,
		EnvCompactAtPercent: g.CompactAtPercent, EnvCompactAtTokens: g.CompactAtTokens} {
		if n > 0 {
			env[name] = strconv.FormatInt(n, 10)
		}
	}
	if len(g.Extra) > 0 {
		data, err := json.Marshal(g.Extra)
		if err == nil {
			env[EnvGenerationExtra] = string(data)
		}
	}
	return env
}

// Reserved says whether name is the contract's own variable: HOME and
// every TROUPE_* variable troupe sets for an agent. A stack's env and
// fixed_env may set none of them: they carry who the agent is, its home,
// the sha256-pinned persona's file, its model, its round limit and its
// generation settings. (Settings of troupe's own tools a stack runs, such
// as troupe acp's TROUPE_ACP_PERMISSION, are the stack's to set.)
func Reserved(name string) bool {
	return name == "HOME" || contractNames[name]
}

// contractNames are the TROUPE_* variables of the contract.
var contractNames = map[string]bool{
	EnvRelayURL: true, EnvPrivateKeyFile: true, EnvLLMTokenFile: true, EnvChannel: true, EnvLLMBaseURL: true,
	EnvModel: true, EnvSystemPromptFile: true, EnvMaxRounds: true, EnvDeadline: true, EnvWorkdir: true, EnvAgentID: true,
	EnvThinkingEffort: true, EnvMaxOutputTokens: true, EnvContextWindowTokens: true, EnvCompactAtPercent: true,
	EnvCompactAtTokens: true, EnvGenerationExtra: true, EnvMCPServers: true, EnvSkillsDir: true,
}

// HostedEnv is the environment of an agent a bridge hosts (troupe acp,
// troupe cli): the bridge's own, less the key file's variable. The agent
// runs as the same uid and could read the key anyway; without the
// variable, an agent that happens to honour the contract itself does not
// try to take the bridge's place on the relay.
func HostedEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, EnvPrivateKeyFile+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// ExitCannotWork is the exit status of an agent that finds it cannot work
// at all: its program is missing, its configuration refused, its first
// run failed. troupe ends the trial at once as an infrastructure error
// (unscored), quoting the agent's last stderr lines, rather than scoring
// the roster on an agent that never worked. 78 is EX_CONFIG of
// sysexits.h.
const ExitCannotWork = 78

// CannotWorkError is an agent's reason to exit with ExitCannotWork.
type CannotWorkError struct{ Err error }

func (e *CannotWorkError) Error() string { return e.Err.Error() }
func (e *CannotWorkError) Unwrap() error { return e.Err }
