package trial

import (
	"github.com/troupebench/troupe/trialdir"
)

// Reason is why the agents' work ended (step 7 of a trial): the result's
// completion_reason, a type of the result's format (trialdir.Reason) whose
// values are the trial's.
type Reason = trialdir.Reason

// The completion reasons.
const (
	DeclaredDone    Reason = "declared_done"
	Deadline        Reason = "deadline"
	BudgetExhausted Reason = "budget_exhausted"
	AgentsExited    Reason = "agents_exited"
	Cancelled       Reason = "cancelled"
	InfraError      Reason = "infra_error"
)
