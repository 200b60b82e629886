package llm

import (
	"fmt"
	"strings"

	"github.com/troupebench/troupe/modelcall"
)

// Exhaustion reports a spent budget: an agent's (Agent set) or the trial's.
type Exhaustion struct {
	Agent  string
	Budget string // max_calls, max_input_tokens, max_output_tokens or max_cost_usd
	Spent  float64
	Limit  float64
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
		if _, err := st.spec.Log.Write(append(t.records.Scrub(r.Line()), '\n')); err != nil {
			t.g.Logger.Error("cannot write call record", "agent", st.spec.ID, "err", err)
		}
	}
	if st.exhausted == nil { // max_calls is spent on admission
		b := st.spec.Budget
		for _, l := range []budgetLimit{
			intLimit("max_input_tokens", st.totals.InputTokens, b.MaxInputTokens),
			intLimit("max_output_tokens", st.totals.OutputTokens, b.MaxOutputTokens),
			floatLimit("max_cost_usd", float64(st.totals.CostUSD), b.MaxCostUSD),
		} {
			if l.set && l.spent >= l.max {
				st.spend(Exhaustion{Agent: st.spec.ID, Budget: l.name, Spent: l.spent, Limit: l.max})
				break
			}
		}
	}
	if max := t.spec.MaxCostUSD; t.exhausted == nil && max != nil && float64(t.total.CostUSD) >= *max {
		e := Exhaustion{Budget: "max_cost_usd", Spent: float64(t.total.CostUSD), Limit: *max}
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
