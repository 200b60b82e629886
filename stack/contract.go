// Package stack is the seam between troupe and the programs that are team
// members: the stack contract (the TROUPE_* variables and files every
// member is given, docs/stacks.md) and the stacks that run one (what to
// upload, pinned by digest; the command; how the contract's values map to
// the names an agent reads). troupe's reference agent reads the contract
// from here; a trial launches any stack through it. Nothing else spells
// the contract.
package stack

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
	for name, value := range v.Generation.env() {
		env[name] = value
	}
	return env
}

// env is the generation settings' variables, those set.
func (g Generation) env() map[string]string {
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

// The contract values a stack's env may map to its agent's own names.
const (
	ValueRelayURL   = "relay_url"
	ValueChannel    = "channel"
	ValueKeyFile    = "key_file"
	ValueKey        = "key" // the key file's content
	ValueTokenFile  = "token_file"
	ValueToken      = "token" // the token file's content: a gateway token, never a real key
	ValueLLMBaseURL = "llm_base_url"
	ValueLLMURL     = "llm_url" // the gateway's root, without /v1 (ANTHROPIC_BASE_URL takes it)
	ValueModel      = "model"
	ValuePromptFile = "prompt_file"
	ValueWorkdir    = "workdir"
	ValueDeadline   = "deadline"
	ValueAgentID    = "agent_id"
	ValueHome       = "home"
	ValueMaxRounds  = "max_rounds"
	// The generation settings: "" when the manifest leaves them unset.
	ValueThinkingEffort      = "thinking_effort"
	ValueMaxOutputTokens     = "max_output_tokens"
	ValueContextWindowTokens = "context_window_tokens"
	ValueCompactAtPercent    = "compact_at_percent"
	ValueCompactAtTokens     = "compact_at_tokens"
	ValueGenerationExtra     = "generation_extra"
)

// contractEnv says whether name is the contract's own variable: HOME and
// every TROUPE_* variable troupe sets for an agent. A stack's env and
// fixed_env may set none of them: they carry who the agent is, its home,
// the sha256-pinned persona's file, its model, its round limit and its
// generation settings. (Settings of troupe's own tools a stack runs, such
// as troupe acp's TROUPE_ACP_PERMISSION, are the stack's to set.)
func contractEnv(name string) bool {
	return name == "HOME" || contractNames[name]
}

// contractNames are the TROUPE_* variables of the contract.
var contractNames = map[string]bool{
	EnvRelayURL: true, EnvPrivateKeyFile: true, EnvLLMTokenFile: true, EnvChannel: true, EnvLLMBaseURL: true,
	EnvModel: true, EnvSystemPromptFile: true, EnvMaxRounds: true, EnvDeadline: true, EnvWorkdir: true, EnvAgentID: true,
	EnvThinkingEffort: true, EnvMaxOutputTokens: true, EnvContextWindowTokens: true, EnvCompactAtPercent: true,
	EnvCompactAtTokens: true, EnvGenerationExtra: true,
}

// values are the contract's values by name, for a stack's env mapping;
// key and token are the secrets' content.
func (v Values) values(key, token string) map[string]string {
	env := v.Env()
	vals := map[string]string{
		ValueRelayURL: v.RelayURL, ValueChannel: v.Channel, ValueKeyFile: env[EnvPrivateKeyFile], ValueKey: key,
		ValueTokenFile: env[EnvLLMTokenFile], ValueToken: token, ValueLLMBaseURL: v.LLMBaseURL,
		ValueLLMURL: trimV1(v.LLMBaseURL), ValueModel: v.Model, ValuePromptFile: env[EnvSystemPromptFile],
		ValueWorkdir: v.Workdir, ValueDeadline: env[EnvDeadline], ValueAgentID: v.AgentID, ValueHome: env["HOME"],
		ValueMaxRounds: strconv.Itoa(v.MaxRounds),
	}
	gen := v.Generation.env()
	for value, name := range map[string]string{ValueThinkingEffort: EnvThinkingEffort, ValueMaxOutputTokens: EnvMaxOutputTokens,
		ValueContextWindowTokens: EnvContextWindowTokens, ValueCompactAtPercent: EnvCompactAtPercent, ValueCompactAtTokens: EnvCompactAtTokens,
		ValueGenerationExtra: EnvGenerationExtra} {
		vals[value] = gen[name]
	}
	return vals
}

func trimV1(u string) string {
	if len(u) >= 3 && u[len(u)-3:] == "/v1" {
		return u[:len(u)-3]
	}
	return u
}

// valueNames lists the values a mapping may name, for messages.
func valueNames() string {
	return strings.Join([]string{ValueRelayURL, ValueChannel, ValueKeyFile, ValueKey, ValueTokenFile, ValueToken, ValueLLMBaseURL, ValueLLMURL,
		ValueModel, ValuePromptFile, ValueWorkdir, ValueDeadline, ValueAgentID, ValueHome, ValueMaxRounds,
		ValueThinkingEffort, ValueMaxOutputTokens, ValueContextWindowTokens, ValueCompactAtPercent, ValueCompactAtTokens, ValueGenerationExtra}, ", ")
}
