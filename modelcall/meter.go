package modelcall

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"time"
)

// Record is one call, as the gateway meters it: a line of the agent's
// llm-calls.jsonl. Record.Line writes it; ParseRecord and ReadRecords read
// it back.
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
	// estimated from cache_read_rate (CachedReported, CachedEstimated);
	// empty when the call used nothing.
	CachedSource string  `json:"cached_source,omitempty"`
	CostUSD      float64 `json:"cost_usd"`
	// ErrorClass is one of the Class constants; empty for a success.
	ErrorClass string `json:"error_class,omitempty"`
	Error      string `json:"error,omitempty"`
	RetryAfter string `json:"retry_after,omitempty"`
	// Fault names an injected fault that shaped the call.
	Fault string `json:"fault,omitempty"`
	// Retries counts the upstream's answers the gateway retried on the
	// agent's behalf (a 429, a 5xx, a connection that failed before an
	// answer), and RetryWaitMS the time it waited between them: part of
	// LatencyMS, never charged (a refused attempt has no usage).
	Retries     int     `json:"retries,omitempty"`
	RetryWaitMS float64 `json:"retry_wait_ms,omitempty"`
	// Asked is what the call asked beside its messages (effort, output
	// limit); nil when it asked nothing.
	Asked *Asked `json:"asked,omitempty"`
	// Replayed: a replay answered the call from its recording, for
	// nothing (package llm, replay.go).
	Replayed bool `json:"replayed,omitempty"`
	// Uncounted marks a call the gateway never admitted against the
	// budgets: refused (a spent budget, a trial that has ended, a request
	// it could not take) or cut before its request arrived. It used
	// nothing, and no count of calls (the totals, result.json, the job's)
	// includes it.
	Uncounted bool `json:"uncounted,omitempty"`
}

// Cached-count sources, as written in records.
const (
	CachedReported  = "reported"
	CachedEstimated = "estimated"
)

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
	// ClassReplayDiverged: a replay refused the call after its agent's
	// divergence.
	ClassReplayDiverged = "replay_diverged"
)

// RequestCut opens the error of a call whose request did not arrive
// whole: the agent hung up, or was swept, while it was sending it.
const RequestCut = "reading the request: "

// RequestArrived says whether the gateway read the call's request whole.
// An agent swept at a trial's end while it sends a request leaves a
// metering line that cannot say what was asked (Asked nil) and no
// conversation record: counts of what agents asked leave such lines out.
func (r Record) RequestArrived() bool {
	return r.ErrorClass != ClassDisconnect || !strings.HasPrefix(r.Error, RequestCut)
}

// Line is the record as a line of llm-calls.jsonl, without its newline.
func (r Record) Line() []byte {
	data, _ := json.Marshal(r)
	return data
}

// ParseRecord reads a line of llm-calls.jsonl; false when it is none (a
// bound's marker where the middle of the file was dropped, a broken line).
func ParseRecord(line []byte) (Record, bool) {
	var r Record
	if json.Unmarshal(line, &r) != nil {
		return Record{}, false
	}
	return r, true
}

// maxRecordsLine bounds a line of llm-calls.jsonl when it is read.
const maxRecordsLine = 16 << 20

// ReadRecords calls fn with each record of an llm-calls.jsonl, in order,
// skipping the lines that are none, and returns the error that ended the
// reading: nil at the end.
func ReadRecords(r io.Reader, fn func(Record)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxRecordsLine)
	for sc.Scan() {
		if rec, ok := ParseRecord(sc.Bytes()); ok {
			fn(rec)
		}
	}
	return sc.Err()
}

// Totals adds up calls.
type Totals struct {
	Calls        int64 `json:"calls"`
	InputTokens  int64 `json:"input_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CostUSD      USD   `json:"cost_usd"`
}

// Add adds another total: sums over agents, roles and trials.
func (t *Totals) Add(o Totals) {
	t.Calls += o.Calls
	t.InputTokens += o.InputTokens
	t.CachedTokens += o.CachedTokens
	t.OutputTokens += o.OutputTokens
	t.CostUSD += o.CostUSD
}

// AddUsage adds what a metered call used, its tokens and cost, but not the
// call: the gateway counts a call when it admits it, before it is metered.
func (t *Totals) AddUsage(r Record) {
	t.InputTokens += r.InputTokens
	t.CachedTokens += r.CachedTokens
	t.OutputTokens += r.OutputTokens
	t.CostUSD += USD(r.CostUSD)
}
