package llm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

// AgentSpec is one agent as the gateway sees it.
type AgentSpec struct {
	// ID is the agent's name (lead-1); Role, Kind and Pubkey are trial facts
	// a mock scenario may use.
	ID, Role, Kind, Pubkey string
	Endpoint               string
	Budget                 manifest.Budget
	// Log receives the agent's call records as JSON lines; nil keeps none.
	Log io.Writer
	// Conversation receives every call whole, request and answer (see
	// record.go); nil keeps none.
	Conversation io.Writer
}

// TrialSpec is what the gateway needs to know about a trial.
type TrialSpec struct {
	ID string
	// Name is the trial's name, the same on every run of it
	// (<task>__<condition>__<attempt>): a mock scenario's choices are
	// seeded by it. Empty, ID stands in.
	Name string
	// Channel and UserPubkey are trial facts for mock scenarios.
	Channel, UserPubkey string
	Agents              []AgentSpec
	Prices              map[string]manifest.Price
	// MaxCostUSD caps the whole trial; nil is no cap.
	MaxCostUSD *float64
	// Lead is the agent whose spent budget ends the trial (its
	// orchestrator): the moment it is spent, as the trial's own, the trial's
	// calls are frozen (see Freeze), so that no call admitted after it
	// depends on how soon the trial reads the exhaustion.
	Lead string
	// Replay plays a recorded trial's answers (replay.go); nil asks the
	// endpoints.
	Replay *Replay
	// Secrets are the trial's own beyond its tokens (its members' keys in
	// the forms they are shown in, values taken from the host): the records
	// are scrubbed of them as the trial's files are, and a replay scrubs a
	// request of them before comparing it with its record, so that like is
	// compared with like.
	Secrets []secret.Secret
}

// Exhaustion reports a spent budget: an agent's (Agent set) or the trial's.
type Exhaustion struct {
	Agent  string
	Budget string // max_calls, max_input_tokens, max_output_tokens or max_cost_usd
	Spent  float64
	Limit  float64
}

// Frozen says what froze a trial's calls first.
type Frozen struct {
	// Cause is what the trial gave Freeze (its completion reason), or
	// ClassBudgetExhausted when a spent budget froze it.
	Cause string
	// Spent is the lead's or the trial's spent budget that froze the trial;
	// nil when Freeze did.
	Spent *Exhaustion
}

// BudgetExceededError is why a call was refused before it was forwarded.
type BudgetExceededError struct {
	Agent  string // "" for the trial's budget
	Budget string
	Spent  float64
	Limit  float64
}

func (e *BudgetExceededError) Error() string {
	whose := "the trial's"
	if e.Agent != "" {
		whose = "agent " + e.Agent + "'s"
	}
	return fmt.Sprintf("budget exhausted: %s %s is spent (%s of %s)", whose, e.Budget, formatAmount(e.Budget, e.Spent), formatAmount(e.Budget, e.Limit))
}

func formatAmount(budget string, v float64) string {
	if strings.HasSuffix(budget, "_usd") {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// Trial is a trial's view of the gateway: one token per agent, running
// totals, and budget exhaustions as they happen.
type Trial struct {
	g    *Gateway
	spec TrialSpec
	// scrubber finds the gateway's keys and this trial's tokens in what
	// reaches its agents; records finds those and the trial's own secrets
	// (TrialSpec.Secrets) in what it writes and in what a replay compares.
	scrubber, records *secret.Scrubber

	mu        sync.Mutex
	agents    map[string]*agentState   // by agent id
	tokens    map[string]secret.Secret // agent id -> token
	total     modelcall.Totals
	exhausted *Exhaustion
	events    chan Exhaustion
	// frozen is set once, by Freeze or by the lead's or the trial's spent
	// budget: from then on no call is admitted.
	frozen *Frozen
	// turnsUntil is when turns in progress at a FreezeAfterTurns must have
	// ended; zero for a plain Freeze.
	turnsUntil time.Time
	closed     bool
	calls      map[*call]struct{} // in flight
	idle       chan struct{}      // closed once the trial is closed and no call is in flight
	replay     *replayState       // nil when the trial is no replay
}

// agentState is one agent's grant: where its calls go and what it has used.
type agentState struct {
	trial    *Trial
	spec     AgentSpec
	endpoint Endpoint
	price    manifest.Price
	script   *scriptCursor // mock endpoints only

	// guarded by trial.mu
	totals    modelcall.Totals
	exhausted *Exhaustion
	conv      *modelcall.RecordWriter
	replay    *replayCursor // nil when the trial is no replay
	// midTurn: the agent's last answer asked for tools, so its turn goes
	// on with the call that brings their results.
	midTurn bool
}

// OpenTrial mints a token for each agent. Every endpoint must be configured
// (or be mock/<scenario>) and priced, and every mock scenario must load.
func (g *Gateway) OpenTrial(spec TrialSpec) (*Trial, error) {
	t := &Trial{g: g, spec: spec, agents: map[string]*agentState{}, tokens: map[string]secret.Secret{}, events: make(chan Exhaustion, len(spec.Agents)+1),
		calls: map[*call]struct{}{}, idle: make(chan struct{})}
	var errs []error
	if spec.Replay != nil {
		var err error
		if t.replay, err = newReplayState(spec); err != nil {
			return nil, fmt.Errorf("llm: trial %s: %w", spec.ID, err)
		}
	}
	scenarios := map[string]*Scenario{}
	for _, a := range spec.Agents {
		ep, ok := g.endpoint(a.Endpoint)
		if !ok {
			errs = append(errs, fmt.Errorf("agent %s: endpoint %q is not configured (add it under endpoints:, or name it mock/<scenario>)", a.ID, a.Endpoint))
			continue
		}
		price, ok := spec.Prices[a.Endpoint]
		if !ok {
			errs = append(errs, fmt.Errorf("agent %s: endpoint %q has no price", a.ID, a.Endpoint))
			continue
		}
		if _, dup := t.agents[a.ID]; dup {
			errs = append(errs, fmt.Errorf("agent %s appears twice", a.ID))
			continue
		}
		st := &agentState{trial: t, spec: a, endpoint: ep, price: price}
		if spec.Replay != nil {
			st.replay = newReplayCursor(spec.Replay.Calls[a.ID])
		}
		if ep.API == Mock {
			sc, ok := scenarios[ep.Scenario]
			if !ok {
				var err error
				if sc, err = g.scenario(ep.Scenario); err != nil {
					errs = append(errs, fmt.Errorf("agent %s: %w", a.ID, err))
					continue
				}
				scenarios[ep.Scenario] = sc
			}
			st.script = sc.cursor(spec, a)
		}
		t.agents[a.ID] = st
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("llm: trial %s: %w", spec.ID, err)
	}
	secrets := slices.Collect(maps.Values(g.keys))
	for id := range t.agents {
		t.tokens[id] = newToken()
		secrets = append(secrets, t.tokens[id], secret.New(strings.ToUpper(t.tokens[id].Reveal())))
	}
	t.scrubber = secret.NewScrubber(secrets...)
	t.records = secret.NewScrubber(append(secrets, spec.Secrets...)...)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open || g.closed {
		return nil, fmt.Errorf("llm: trial %s: the gateway is not open", spec.ID)
	}
	for id, st := range t.agents {
		g.grants[t.tokens[id].Reveal()] = st
	}
	g.trials[t] = struct{}{}
	return t, nil
}

func newToken() secret.Secret {
	b := make([]byte, 24)
	rand.Read(b)
	return secret.New("tg-" + hex.EncodeToString(b))
}

// Token is the agent's gateway token: the only credential its container
// gets for model calls.
func (t *Trial) Token(agent string) secret.Secret {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tokens[agent]
}

// Exhausted delivers each budget exhaustion once, at the moment the budget
// becomes spent: max_calls when the call that reaches it is admitted (that
// call still runs), the token and cost budgets when the call that crosses
// them is settled. An agent that stops calling at its limit (the reference
// agent's round limit is max_calls) is reported all the same, though no
// call of it is ever refused. The lead's and the trial's exhaustions have
// frozen the trial by the time they are delivered.
func (t *Trial) Exhausted() <-chan Exhaustion { return t.events }

// Spent returns every spent budget: per agent, and the trial's (nil when
// it is not spent). A call in flight when the trial froze may still spend
// one as it settles: read it after Settle or Close.
func (t *Trial) Spent() (perAgent map[string]Exhaustion, trial *Exhaustion) {
	t.mu.Lock()
	defer t.mu.Unlock()
	perAgent = map[string]Exhaustion{}
	for id, st := range t.agents {
		if st.exhausted != nil {
			perAgent[id] = *st.exhausted
		}
	}
	if t.exhausted != nil {
		e := *t.exhausted
		trial = &e
	}
	return perAgent, trial
}

// Freeze ends the trial's model calls at its end decision: from now on
// every call is refused before it is forwarded (410, error type
// trial_ended, in no file of the trial: neither metered nor recorded, only
// logged by the gateway), while the calls already admitted run on, for
// Settle to wait for.
// So a trial's usage is what was admitted before its end, whatever the
// timing of what follows. cause is the trial's completion reason. The
// first freeze holds, and every call returns it: the trial reads there
// whether its lead's budget was spent before its DONE: arrived.
func (t *Trial) Freeze(cause string) Frozen {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.frozen == nil {
		t.frozen = &Frozen{Cause: cause}
	}
	return *t.frozen
}

// FreezeAfterTurns freezes the trial at its orchestrator's DONE:, as
// Freeze does, but lets the agents' turns in progress end, within the
// gateway's TurnGrace: an agent whose last answer asked for tools may make
// the calls that continue its turn (counted as the trial's), and no call
// starts a turn. So a call that follows from what the agent was doing
// when the DONE: came is the trial's whatever the timing (a worker's last
// call after its report, the lead's after its DONE:), and Settle waits for
// it. A spent budget refuses as before.
func (t *Trial) FreezeAfterTurns(cause string) Frozen {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.frozen == nil {
		t.frozen = &Frozen{Cause: cause}
		t.turnsUntil = t.g.Now().Add(t.g.TurnGrace)
	}
	return *t.frozen
}

// continues says whether the agent's next call may go on after the
// freeze: it continues a turn in progress at a FreezeAfterTurns, within
// the grace. t.mu is held.
func (st *agentState) continues() bool {
	t := st.trial
	return st.midTurn && !t.turnsUntil.IsZero() && t.g.Now().Before(t.turnsUntil)
}

// endOfAnswer notes whether the call's answer asked for tools: whether the
// agent's turn goes on.
func (st *agentState) endOfAnswer(c *call) {
	asked := false
	if c.status > 0 && c.status < 400 && c.complete && c.answerOmitted == 0 {
		a := modelcall.Call{API: c.api, Stream: c.stream, Status: c.status}
		if c.stream {
			a.AnswerText = c.answer.String()
		} else {
			a.Answer = c.answer.Bytes()
		}
		asked = len(modelcall.AnswerOf(a).ToolCalls) > 0
	}
	st.trial.mu.Lock()
	st.midTurn = asked
	st.trial.mu.Unlock()
}

// turnsInProgress says whether an agent's turn is still to end after a
// FreezeAfterTurns. t.mu is held.
func (t *Trial) turnsInProgress() bool {
	for _, st := range t.agents {
		if st.continues() {
			return true
		}
	}
	return false
}

// ended says whether the agent's call is to be refused as trial_ended:
// the trial is frozen, and no spent budget refuses it first.
func (st *agentState) ended() bool {
	st.trial.mu.Lock()
	defer st.trial.mu.Unlock()
	refusal, frozen := st.refusal()
	return frozen && refusal == nil
}

// settlePoll is how often Settle looks at the calls in flight.
const settlePoll = 10 * time.Millisecond

// Settle freezes the trial, if it is not yet, and waits for its calls in
// flight to end and be recorded, and after a FreezeAfterTurns for the
// turns in progress to end (within TurnGrace), for at most the gateway's DrainGrace or
// until ctx ends, so that they are counted the same way every time before
// the agents are swept: a mock's call ends at once, a real upstream's when
// it has answered. A call held with no end in sight (a scripted or
// injected hang, a replay holding a call past its agent's recording) is
// cut at once, for waiting brings nothing, and is recorded as a
// disconnect. It returns how many calls were still in flight when it gave
// up; Close ends those as it says.
func (t *Trial) Settle(ctx context.Context) int {
	t.Freeze("settled")
	grace := time.NewTimer(t.g.DrainGrace)
	defer grace.Stop()
	poll := time.NewTicker(settlePoll)
	defer poll.Stop()
	for {
		t.mu.Lock()
		n := len(t.calls)
		if n == 0 && t.turnsInProgress() {
			n = -1 // a turn is still to end: its next call is the trial's
		}
		var held []*call
		for c := range t.calls {
			if c.held.Load() {
				held = append(held, c)
			}
		}
		t.mu.Unlock()
		if n == 0 {
			return 0
		}
		for _, c := range held {
			c.end(errTrialClosed, t.g.DrainGrace)
		}
		select {
		case <-poll.C:
		case <-grace.C:
			return max(n, 0)
		case <-ctx.Done():
			return max(n, 0)
		}
	}
}

// Usage returns the running totals per agent and for the whole trial.
func (t *Trial) Usage() (perAgent map[string]modelcall.Totals, total modelcall.Totals) {
	t.mu.Lock()
	defer t.mu.Unlock()
	perAgent = make(map[string]modelcall.Totals, len(t.agents))
	for id, st := range t.agents {
		perAgent[id] = st.totals
	}
	return perAgent, t.total
}

// Close revokes every token of the trial and ends its calls in flight, then
// waits for them to be recorded, so the agents' logs can be closed after it.
// A call that can bring no usage figure — a mock's, one held by a fault,
// one whose upstream has not answered — is cancelled at once. A real
// upstream's answer that has started is read on for the usage the provider
// reports at its end, for at most DrainGrace. If ctx ends first, what is
// left is cancelled and Close returns an error saying how many calls were
// still in flight. Close may be called more than once, and concurrently.
func (t *Trial) Close(ctx context.Context) error {
	t.g.mu.Lock()
	for _, token := range t.tokens {
		delete(t.g.grants, token.Reveal())
	}
	delete(t.g.trials, t)
	t.g.mu.Unlock()
	t.mu.Lock()
	t.closed = true
	calls := slices.Collect(maps.Keys(t.calls))
	t.signalIdle()
	t.mu.Unlock()
	for _, c := range calls {
		c.end(errTrialClosed, t.g.DrainGrace)
	}
	select {
	case <-t.idle:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	calls = slices.Collect(maps.Keys(t.calls))
	t.mu.Unlock()
	cause := fmt.Errorf("%w and its teardown ran out of time (%w)", errTrialClosed, context.Cause(ctx))
	for _, c := range calls {
		c.cancel(cause)
	}
	return fmt.Errorf("llm: trial %s: %d calls still in flight: %w", t.spec.ID, len(calls), context.Cause(ctx))
}

// signalIdle closes idle once the trial is closed and has no call in
// flight. t.mu is held.
func (t *Trial) signalIdle() {
	select {
	case <-t.idle:
	default:
		if t.closed && len(t.calls) == 0 {
			close(t.idle)
		}
	}
}

// enter counts a call in flight, unless the trial is closed.
func (t *Trial) enter(c *call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.calls[c] = struct{}{}
	return true
}

func (t *Trial) leave(c *call) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.calls, c)
	t.signalIdle()
}

// String names the trial. A Trial holds its agents' tokens, so it never
// prints its fields.
func (t *Trial) String() string { return "llm trial " + t.spec.ID }

// Format prints String for every verb, %#v and %d included.
func (t *Trial) Format(f fmt.State, _ rune) { io.WriteString(f, t.String()) }

// LogValue is the trial in slog: its id and agents, never a token.
func (t *Trial) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", t.spec.ID), slog.Any("agents", slices.Sorted(maps.Keys(t.agents))))
}

// refusal says why the agent's next call is refused, if it is: a spent
// budget, the trial's or the agent's (named first, for it says more), or
// the frozen trial. t.mu is held.
func (st *agentState) refusal() (refusal *BudgetExceededError, frozen bool) {
	t := st.trial
	if e := t.exhausted; e != nil {
		return &BudgetExceededError{Budget: e.Budget, Spent: e.Spent, Limit: e.Limit}, false
	}
	if e := st.exhausted; e != nil {
		return &BudgetExceededError{Agent: st.spec.ID, Budget: e.Budget, Spent: e.Spent, Limit: e.Limit}, false
	}
	return nil, t.frozen != nil && !st.continues()
}

// admit counts a call against the budgets before it is forwarded, or says
// why it is refused (see refusal). A call is counted when admitted, so concurrent calls cannot exceed
// max_calls, and the call that reaches max_calls marks it spent at once
// (and runs): an agent that stops at its limit is known to have spent it.
func (st *agentState) admit() (refusal *BudgetExceededError, frozen bool) {
	t := st.trial
	t.mu.Lock()
	defer t.mu.Unlock()
	if refusal, frozen = st.refusal(); refusal != nil || frozen {
		return refusal, frozen
	}
	if t.frozen != nil {
		st.midTurn = false // this call continues the turn; its answer says if it goes on
	}
	st.totals.Calls++
	t.total.Calls++
	if max := st.spec.Budget.MaxCalls; max != nil && st.totals.Calls >= *max {
		st.spend(Exhaustion{Agent: st.spec.ID, Budget: "max_calls", Spent: float64(st.totals.Calls), Limit: float64(*max)})
	}
	return nil, false
}

// spend marks the agent's budget spent and reports it at once; the lead's
// freezes the trial. t.mu is held.
func (st *agentState) spend(e Exhaustion) {
	t := st.trial
	st.exhausted = &e
	t.report(e)
	if st.spec.ID == t.spec.Lead {
		t.freezeFor(e)
	}
}

// freezeFor freezes the trial for a spent budget, unless it is frozen
// already. t.mu is held.
func (t *Trial) freezeFor(e Exhaustion) {
	if t.frozen == nil {
		t.frozen = &Frozen{Cause: modelcall.ClassBudgetExhausted, Spent: &e}
	}
}

// settle adds a finished call's usage and marks every budget it crossed as
// spent, at once: the agent's next call is refused, and the trial is told.
// It writes the call's record.
func (st *agentState) settle(r modelcall.Record) {
	t := st.trial
	t.mu.Lock()
	defer t.mu.Unlock()
	st.totals.AddUsage(r)
	t.total.AddUsage(r)
	if st.spec.Log != nil {
		line, _ := json.Marshal(r)
		if _, err := st.spec.Log.Write(append(t.records.Scrub(line), '\n')); err != nil {
			t.g.Logger.Error("cannot write call record", "agent", st.spec.ID, "err", err)
		}
	}
	if st.exhausted == nil { // max_calls is spent on admission
		b := st.spec.Budget
		for _, l := range []budgetLimit{
			intLimit("max_input_tokens", st.totals.InputTokens, b.MaxInputTokens),
			intLimit("max_output_tokens", st.totals.OutputTokens, b.MaxOutputTokens),
			floatLimit("max_cost_usd", st.totals.CostUSD, b.MaxCostUSD),
		} {
			if l.set && l.spent >= l.max {
				st.spend(Exhaustion{Agent: st.spec.ID, Budget: l.name, Spent: l.spent, Limit: l.max})
				break
			}
		}
	}
	if max := t.spec.MaxCostUSD; t.exhausted == nil && max != nil && t.total.CostUSD >= *max {
		e := Exhaustion{Budget: "max_cost_usd", Spent: t.total.CostUSD, Limit: *max}
		t.exhausted = &e
		t.report(e)
		t.freezeFor(e)
	}
}

// budgetLimit is one budget and what has been spent against it.
type budgetLimit struct {
	name       string
	spent, max float64
	set        bool
}

func intLimit(name string, spent int64, max *int64) budgetLimit {
	if max == nil {
		return budgetLimit{name: name}
	}
	return budgetLimit{name: name, spent: float64(spent), max: float64(*max), set: true}
}

func floatLimit(name string, spent float64, max *float64) budgetLimit {
	if max == nil {
		return budgetLimit{name: name}
	}
	return budgetLimit{name: name, spent: spent, max: *max, set: true}
}

// report hands an exhaustion to the trial without ever blocking a call: the
// channel has room for one per agent and one for the trial.
func (t *Trial) report(e Exhaustion) {
	select {
	case t.events <- e:
	default:
	}
}
