package llm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	// Log receives the agent's call records (modelcall.Record) as JSON
	// lines; nil keeps none.
	Log io.Writer
	// Conversation receives every call whole, request and answer, as a
	// conversation record (modelcall.RecordWriter); nil keeps none.
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
	// unanswerable holds the first call the harness could not answer.
	unanswerable chan Unanswerable
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
		unanswerable: make(chan Unanswerable, 1), calls: map[*call]struct{}{}, idle: make(chan struct{})}
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
