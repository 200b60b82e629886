package stack

import (
	"strconv"
	"strings"

	"github.com/troupebench/troupe/contract"
)

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

// values are the contract's values by name, for a stack's env mapping;
// key and token are the secrets' content.
func values(v contract.Values, key, token string) map[string]string {
	env := v.Env()
	vals := map[string]string{
		ValueRelayURL: v.RelayURL, ValueChannel: v.Channel, ValueKeyFile: env[contract.EnvPrivateKeyFile], ValueKey: key,
		ValueTokenFile: env[contract.EnvLLMTokenFile], ValueToken: token, ValueLLMBaseURL: v.LLMBaseURL,
		ValueLLMURL: trimV1(v.LLMBaseURL), ValueModel: v.Model, ValuePromptFile: env[contract.EnvSystemPromptFile],
		ValueWorkdir: v.Workdir, ValueDeadline: env[contract.EnvDeadline], ValueAgentID: v.AgentID, ValueHome: env["HOME"],
		ValueMaxRounds: strconv.Itoa(v.MaxRounds),
	}
	gen := v.Generation.Env()
	for value, name := range map[string]string{ValueThinkingEffort: contract.EnvThinkingEffort, ValueMaxOutputTokens: contract.EnvMaxOutputTokens,
		ValueContextWindowTokens: contract.EnvContextWindowTokens, ValueCompactAtPercent: contract.EnvCompactAtPercent, ValueCompactAtTokens: contract.EnvCompactAtTokens,
		ValueGenerationExtra: contract.EnvGenerationExtra} {
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
