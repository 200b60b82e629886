package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// call is one request in flight, carried through the proxy in its context.
type call struct {
	st  *agentState
	api modelcall.API
	// ctx is the call's own: it outlives an agent that hangs up or a trial
	// that closes only while that can still bring a usage figure (see end).
	ctx      context.Context
	cancel   context.CancelCauseFunc
	mock     bool
	answered atomic.Bool // the upstream's response headers are in
	// held marks a call waiting with no end in sight (a scripted or
	// injected hang, a replay holding it past its recording): Settle cuts
	// it at once.
	held atomic.Bool
	// admitted: counted against the budgets. A call that is not is
	// metered as uncounted.
	admitted bool

	mu    sync.Mutex // guards drain and over
	drain *time.Timer
	over  bool

	stream     bool
	start      time.Time
	firstByte  time.Time
	status     int
	retryAfter string
	usage      modelcall.Usage
	usageSeen  bool
	complete   bool
	errClass   string
	errMsg     string
	fault      string
	// body is the request as forwarded, for the gateway's retries of an
	// upstream call; retries and retryWait are what they took.
	body      []byte
	retries   int
	retryWait time.Duration
	// harness, set by a mock with no step for the call, is why the call
	// is the harness's failure (Unanswerable); harnessClass its code.
	harness, harnessClass string
	cutAfter              int
	settled               bool
	// asked is what the request asked beside its messages.
	asked *modelcall.Asked
	// request and answer are the call whole, for the agent's conversation
	// record (nil and empty when it keeps none).
	request       []byte
	answer        bytes.Buffer
	answerOmitted int
	// countTokens marks a call to /v1/messages/count_tokens: answered, but
	// never charged, counted against the budgets, disturbed by a fault or
	// recorded, for it is not a model call.
	countTokens bool
	// replayed is the recorded call a replay answers this one with; live
	// marks a replay's call sent to the endpoint after a divergence.
	replayed *modelcall.Call
	live     bool
}

type callKey struct{}

func callOf(r *http.Request) *call { return r.Context().Value(callKey{}).(*call) }

// Why a call ended before its answer did: the cause of its context.
var (
	errAgentGone   = errors.New("the agent hung up")
	errTrialClosed = errors.New("the trial ended")
)

// newCall starts a call of agent st. Its context keeps the agent request's
// values but not its cancellation, which end decides.
func newCall(st *agentState, api modelcall.API, r *http.Request, now time.Time) *call {
	c := &call{st: st, api: api, start: now, mock: st.endpoint.API == Mock}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	c.ctx, c.cancel = context.WithValue(ctx, callKey{}, c), cancel
	return c
}

// end stops a call whose agent hung up or whose trial closed, unless reading
// on still buys a usage figure. A real upstream's answer that has started
// reports its usage at its end, and the provider bills those tokens either
// way: it is read on for at most grace. Any other call is cancelled at once:
// a mock bills nothing, and an upstream that has not answered has no figure
// to give. end may be called more than once; the first grace holds.
func (c *call) end(cause error, grace time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.over:
	case c.mock || !c.answered.Load():
		c.cancel(cause)
	case c.drain == nil:
		c.drain = time.AfterFunc(grace, func() {
			c.cancel(fmt.Errorf("%w, and the upstream's answer did not end within the drain grace (%v)", cause, grace))
		})
	}
}

// release ends the call's context and its drain timer once the call is
// answered and recorded.
func (c *call) release() {
	c.mu.Lock()
	c.over = true
	if c.drain != nil {
		c.drain.Stop()
	}
	c.mu.Unlock()
	c.cancel(nil)
}

// refuseEnded refuses a call that arrives after its trial's end decision
// (Trial.Freeze): 410 with error type trial_ended, which neither official
// SDK retries, nor the reference agent.
func (c *call) refuseEnded(w http.ResponseWriter) {
	c.status, c.errClass = http.StatusGone, modelcall.ClassTrialEnded
	c.errMsg = "the trial has ended: troupe's gateway takes no more calls for it"
	w.Header().Set("X-Should-Retry", "false")
	writeError(w, c.api, c.status, modelcall.ClassTrialEnded, c.errMsg)
}

// gone records a call ended before it was forwarded or answered, and
// tells the agent why, in case it is still there (its trial ended).
func (c *call) gone(w http.ResponseWriter, where string) {
	c.status, c.errClass = http.StatusBadGateway, modelcall.ClassDisconnect
	c.errMsg = fmt.Sprintf("%v %s", context.Cause(c.ctx), where)
	writeError(w, c.api, c.status, "api_error", c.errMsg)
}
