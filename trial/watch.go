package trial

import (
	"context"
	"fmt"
	"time"

	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/modelcall"
)

// Steps 6 and 7 (docs/run.md): the task posted, and the watch for the trial's end.

// watch posts the instruction (the task's, or a step's) and waits for the
// first thing that ends the agents' work.
func (r *run) watch(ctx context.Context, instruction string) Reason {
	orch := r.agents[0]
	if _, err := r.ch.Post(ctx, instruction, orch.pk); err != nil {
		if ctx.Err() != nil {
			return Cancelled
		}
		r.fail(ErrRelay, fmt.Errorf("post the task: %w", err))
		return InfraError
	}
	r.log.Info("task posted", "to", orch.ID)
	timer := time.NewTimer(time.Until(r.deadline))
	defer timer.Stop()
	exhausted := r.gw.Exhausted()
	unanswerable := r.gw.Unanswerable()
	diverged := r.gw.Diverged() // nil, which never receives, unless a replay
	for {
		select {
		case d := <-diverged:
			r.log.Info("replay diverged", "agent", d.Agent, "call", d.Call, "why", d.Why)
			if r.spec.Replay.OnDivergence == modelcall.DivergeStop {
				r.fail(ErrReplayDiverged, fmt.Errorf("call %d of agent %s left its recording (%s), and --on-divergence stop ends the replay there", d.Call, d.Agent, d.Why))
				return ReplayDiverged
			}
		case <-r.ch.Done():
			r.log.Info("declared done", "content", r.ch.DoneEvent().Content)
			return r.endDecision(DeclaredDone)
		case <-timer.C:
			r.log.Info("deadline")
			return r.endDecision(Deadline)
		case ex := <-exhausted:
			r.log.Info("budget exhausted", "agent", ex.Agent, "budget", ex.Budget, "spent", ex.Spent, "limit", ex.Limit)
			// A worker out of budget idles (the result records it); the
			// orchestrator may still finish. The orchestrator's budget, or
			// the trial's, froze the trial when it was spent, and ends it.
			if ex.Agent == "" || ex.Agent == orch.ID {
				return r.endDecision(BudgetExhausted)
			}
		case u := <-unanswerable:
			// The harness failed the team: not the roster's score. The
			// calls are frozen first, so nothing after counts.
			r.gw.Freeze(string(InfraError))
			r.log.Info("model call unanswerable", "agent", u.Agent, "endpoint", u.Endpoint, "class", u.Class)
			// A teammate that cannot work says so to the team before it
			// exits, and the call that answers its message may be the one
			// no step was written for: the agent is the cause, not the
			// call, so its exit is waited for a moment.
			if r.cannotWorkWithin(cannotWorkGrace) {
				return InfraError
			}
			r.fail(unanswerableKind(u), u)
			return InfraError
		case i := <-r.exits:
			if r.cannotWork(i) {
				return InfraError
			}
			if r.allExited() {
				// Agents stop a little before their deadline (the reference
				// agent 2s): exiting then is the deadline's doing.
				if time.Until(r.deadline) < deadlineSlack {
					return r.endDecision(Deadline)
				}
				return r.endDecision(AgentsExited)
			}
		case <-r.tun.Done():
			r.fail(ErrTunnel, fmt.Errorf("the tunnel ended during the trial: %s", r.tun.Stderr()))
			return InfraError
		case <-ctx.Done():
			return Cancelled
		}
	}
}

// endDecision freezes the trial's model calls for reason and returns the
// reason of the first freeze: the orchestrator's or the trial's budget
// spent (which froze the calls the moment it was), or the orchestrator's
// DONE: (which froze them before it was acknowledged), whichever came
// first; else reason. So the completion reason and the usage never depend
// on how soon this loop reads what happened.
func (r *run) endDecision(reason Reason) Reason {
	first := r.gw.Freeze(string(reason))
	switch {
	case first.Spent != nil:
		return BudgetExhausted
	case first.Cause == string(DeclaredDone):
		return DeclaredDone
	}
	return reason
}

// cannotWorkGrace is how long an unanswerable call waits for an agent
// that cannot work to exit, which would explain it.
const cannotWorkGrace = time.Second

// cannotWork records agent i's exit and, when it exited saying it cannot
// work (a bridge's agent that could not run its first turn), fails the
// trial with that: not the team's failure.
func (r *run) cannotWork(i int) bool {
	ar := r.exited(i)
	code := r.res.Agents[i].ExitCode
	if code == nil || *code != contract.ExitCannotWork {
		return false
	}
	r.fail(ErrAgentStart, fmt.Errorf("agent %s cannot work (it exited %d); its last words: %s", ar.ID, *code, lastWords(ar.stderr.Name(), 600)))
	return true
}

// cannotWorkWithin reports whether an agent exits saying it cannot work
// within d (recording every exit meanwhile).
func (r *run) cannotWorkWithin(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case i := <-r.exits:
			if r.cannotWork(i) {
				return true
			}
		case <-timer.C:
			return false
		}
	}
}

// unanswerableKind is the exception type of an unanswerable call.
func unanswerableKind(u llm.Unanswerable) ErrorKind {
	switch u.Class {
	case modelcall.ClassUnreachable:
		return ErrEndpointUnreachable
	case modelcall.ClassAuth:
		return ErrEndpointAuth
	}
	return ErrMockScenario
}

func (r *run) allExited() bool {
	for _, ar := range r.agents {
		if !ar.exited {
			return false
		}
	}
	return true
}
