package modelcall

// API is a wire format of model calls: the one a call speaks, as records
// name it, and the one an endpoint speaks (package llm adds its mock).
type API string

// The wire formats of model calls.
const (
	// OpenAI is OpenAI's chat completions (POST /v1/chat/completions).
	OpenAI API = "openai"
	// Anthropic is Anthropic's messages (POST /v1/messages).
	Anthropic API = "anthropic"
	// OpenAIResponses is OpenAI's Responses API (POST /v1/responses; Codex
	// speaks it). It is a call's API, never an endpoint's: an openai
	// endpoint forwards it to its upstream's /v1/responses.
	OpenAIResponses API = "openai-responses"
)
