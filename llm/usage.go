package llm

import (
	"math"
	"strings"
	"time"

	"github.com/troupebench/troupe/manifest"
)

// Usage is what one call consumed, normalised across wire formats: Input
// counts every input token, cached ones included (Anthropic's input_tokens
// plus cache reads and cache writes); Cached is the part read from cache.
// Reasoning is the part of Output the model spent reasoning, as OpenAI
// reports it (0 when not reported); it is priced as output.
type Usage struct {
	Input, Cached, Output int64
	Reasoning             int64
	// CachedReported is false when the upstream gave no cached count, so
	// Cached was estimated from the price's cache_read_rate.
	CachedReported bool
}

// Cached-count sources, as written in records.
const (
	CachedReported  = "reported"
	CachedEstimated = "estimated"
)

// Cost prices usage in USD: uncached input, cached input and output at
// their rates per million. When the upstream reported no cached count, the
// cached share is the price's cache_read_rate of the input, rounded half to
// even as the original system rounded it.
func Cost(u Usage, p manifest.Price) (usd float64, cached int64, source string) {
	cached, source = u.Cached, CachedReported
	if !u.CachedReported {
		cached, source = int64(math.RoundToEven(float64(u.Input)*p.CacheReadRate)), CachedEstimated
	}
	cached = min(max(cached, 0), u.Input)
	usd = (float64(u.Input-cached)*p.InputPerMillionUSD + float64(cached)*p.CachedInputPerMillionUSD + float64(u.Output)*p.OutputPerMillionUSD) / 1e6
	return usd, cached, source
}

// Error classes of calls, as written in records.
const (
	ClassRateLimit       = "rate_limit"
	ClassOverloaded      = "overloaded"
	ClassAuth            = "auth"
	ClassBadRequest      = "bad_request"
	ClassTimeout         = "timeout"
	ClassDisconnect      = "disconnect"
	ClassUpstream5xx     = "upstream_5xx"
	ClassUnreachable     = "unreachable" // the upstream could not be reached
	ClassBudgetExhausted = "budget_exhausted"
	// ClassTrialEnded: the call came after its trial's end decision.
	ClassTrialEnded = "trial_ended"
)

// classifyStatus names the error class of an upstream status; "" for success.
func classifyStatus(status int) string {
	switch {
	case status < 400:
		return ""
	case status == 429:
		return ClassRateLimit
	case status == 503 || status == 529:
		return ClassOverloaded
	case status == 401 || status == 403:
		return ClassAuth
	case status >= 500:
		return ClassUpstream5xx
	}
	return ClassBadRequest
}

// Record is one call, as appended to the agent's llm-calls.jsonl.
type Record struct {
	Time     time.Time `json:"time"`
	Trial    string    `json:"trial"`
	Agent    string    `json:"agent"`
	Endpoint string    `json:"endpoint"`
	Model    string    `json:"model"`
	API      API       `json:"api"`
	Stream   bool      `json:"stream"`
	Status   int       `json:"status"`
	// LatencyMS runs from the request to the end of the response; TTFBMS to
	// its first byte.
	LatencyMS    float64 `json:"latency_ms"`
	TTFBMS       float64 `json:"ttfb_ms"`
	InputTokens  int64   `json:"input_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	// ReasoningTokens is the part of OutputTokens spent reasoning, when the
	// upstream reports it (OpenAI's reasoning_tokens).
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
	// CachedSource says whether CachedTokens was reported by the upstream or
	// estimated from cache_read_rate; empty when the call used nothing.
	CachedSource string  `json:"cached_source,omitempty"`
	CostUSD      float64 `json:"cost_usd"`
	ErrorClass   string  `json:"error_class,omitempty"`
	Error        string  `json:"error,omitempty"`
	RetryAfter   string  `json:"retry_after,omitempty"`
	// Fault names an injected fault that shaped the call.
	Fault string `json:"fault,omitempty"`
	// Asked is what the call asked beside its messages (effort, output
	// limit); nil when it asked nothing.
	Asked *Asked `json:"asked,omitempty"`
	// Replayed: a replay answered the call from its recording, for
	// nothing (replay.go).
	Replayed bool `json:"replayed,omitempty"`
	// Uncounted marks a call the gateway never admitted against the
	// budgets: refused (a spent budget, a trial that has ended, a request
	// it could not take) or cut before its request arrived. It used
	// nothing, and no count of calls (the totals, result.json, the job's)
	// includes it.
	Uncounted bool `json:"uncounted,omitempty"`
}

// errRequestCut opens the error of a call whose request did not arrive
// whole: the agent hung up, or was swept, while it was sending it.
const errRequestCut = "reading the request: "

// RequestArrived says whether the gateway read the call's request whole.
// An agent swept at a trial's end while it sends a request leaves a
// metering line that cannot say what was asked (Asked nil) and no
// conversation record: counts of what agents asked leave such lines out.
func (r Record) RequestArrived() bool {
	return r.ErrorClass != ClassDisconnect || !strings.HasPrefix(r.Error, errRequestCut)
}

// Totals adds up calls.
type Totals struct {
	Calls        int64   `json:"calls"`
	InputTokens  int64   `json:"input_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// Add adds another total: sums over agents, roles and trials.
func (t *Totals) Add(o Totals) {
	t.Calls += o.Calls
	t.InputTokens += o.InputTokens
	t.CachedTokens += o.CachedTokens
	t.OutputTokens += o.OutputTokens
	t.CostUSD += o.CostUSD
}

func (t *Totals) add(r Record) {
	t.InputTokens += r.InputTokens
	t.CachedTokens += r.CachedTokens
	t.OutputTokens += r.OutputTokens
	t.CostUSD += r.CostUSD
}
