package llm

import (
	"context"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// Frozen says what froze a trial's calls first.
type Frozen struct {
	// Cause is what the trial gave Freeze (its completion reason), or
	// ClassBudgetExhausted when a spent budget froze it.
	Cause string
	// Spent is the lead's or the trial's spent budget that froze the trial;
	// nil when Freeze did.
	Spent *Exhaustion
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

// Thaw lifts a freeze that no spent budget caused, for a trial of several
// steps (a multi-step task) whose next step's team may call again; the
// turns of the step that ended are over. A freeze for the lead's or the
// trial's spent budget holds: Thaw then returns false, and the trial's
// steps are over.
func (t *Trial) Thaw() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.frozen != nil && t.frozen.Spent != nil {
		return false
	}
	t.frozen, t.turnsUntil = nil, time.Time{}
	for _, st := range t.agents {
		st.midTurn = false
	}
	return true
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
