// Package llm is troupe's model side: the metering gateway agents call
// instead of a model provider, and the scripted mock models that make trials
// run offline.
//
// Agents never hold a real API key. A Trial mints one token per agent, bound
// to the agent, its endpoint, its budget and the trial's; the Gateway takes
// the token on /v1/chat/completions and /v1/responses (OpenAI's chat
// completions and Responses API) or /v1/messages (Anthropic), replaces the
// model with the endpoint's, forwards with the real key read from the host's
// environment, and meters the call from the upstream's own usage fields as
// the response streams through. /v1/messages/count_tokens is answered too,
// but it is not a model call: it is neither charged nor counted nor
// recorded. Every call is priced with the manifest's prices and appended as
// a modelcall.Record to the agent's log (and, kept whole, to its
// conversation record through a modelcall.RecordWriter); budgets are
// checked before each call and after it, and an exhaustion is reported to
// the trial on a channel. What the gateway reads of requests and answers
// (their wire formats, usage, what a call asked) is package modelcall's,
// which holds the model call as data for whatever reads a trial later.
//
// The forwarding is httputil.ReverseProxy (proxy.go): Rewrite swaps model
// and key, ModifyResponse wraps the body in a meter (meter.go) that
// re-frames server-sent events one event per Read (so each is flushed on
// its own) and reads usage on the fly, ErrorHandler answers in the API's
// error shape. Before it, serve.go takes the call in (route, token, body)
// and admits it against the budgets (budget.go) or refuses it; after it,
// finish meters and records it, and a trial's freeze (freeze.go) says
// which calls are still its own. Endpoints with api: mock are served by an
// in-process RoundTripper that plays a Scenario: each call takes the step
// whose When chooses it (a side call, by its system prompt or last user
// message) or else the script's next step in order; Faults inject statuses,
// delays, cut streams and hangs in front of any endpoint.
//
// Every call has a context of its own, which outlives its agent hanging up
// or its trial closing only while that still buys a usage figure: a real
// upstream's answer that has started is read on, for at most DrainGrace,
// for the usage the provider reports at its end; any other call is
// cancelled and recorded at once, so closing a trial never waits on a mock
// or on an upstream that has not answered. Only the response headers the
// APIs define reach the agent, and every byte an upstream says passes
// through a secret.Scrubber of the real keys and the trial's tokens.
package llm
