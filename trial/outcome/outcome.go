// Package outcome is what a trial counts as, in one place: the outcomes a
// trial ends with, which of them are scored, and the pass rate over them.
// The trial that writes a result, the job that totals it and every report
// that reads it use this package, so that "scored" and "pass rate" cannot
// mean two things in two tables.
package outcome

import "math"

// Outcome is what a trial counts as. It is separate from why the agents'
// work ended (the trial's completion reason).
type Outcome string

// The outcomes, as result.json writes them.
const (
	// Passed: the verifier's reward is at least 1.
	Passed Outcome = "passed"
	// Failed: the verifier ran and scored below 1.
	Failed Outcome = "failed"
	// VerifierError: the verifier could not score the trial (it hung, or
	// wrote no reward). The team may have broken the environment, so it
	// counts against the roster, as not passed.
	VerifierError Outcome = "verifier_error"
	// UnscoredInfra: the harness failed, not the team. Never counted
	// against a roster; retried.
	UnscoredInfra Outcome = "unscored_infra"
	// Cancelled: the job was interrupted. Never counted; redone on resume.
	Cancelled Outcome = "cancelled"
)

// Valid reports whether o is one of the outcomes: a result with any other
// would be a trial counted in no column.
func (o Outcome) Valid() bool { return o.Scored() || o == UnscoredInfra || o == Cancelled }

// Scored reports whether a trial of this outcome counts in pass rates,
// intervals and pairings: passed, failed and verifier_error do.
func (o Outcome) Scored() bool { return o == Passed || o == Failed || o == VerifierError }

// Policy says how outcomes count, in words; every table and report that
// shows a pass rate states it.
const Policy = "passed counts as a pass; failed and verifier_error count as scored and not passed; " +
	"unscored_infra (the harness failed) and cancelled trials are shown but left out of every rate, interval and pairing"

// Tally counts trials by outcome.
type Tally struct {
	Passed        int `json:"n_passed"`
	Failed        int `json:"n_failed"`
	VerifierError int `json:"n_verifier_error"`
	UnscoredInfra int `json:"n_unscored_infra"`
	Cancelled     int `json:"n_cancelled"`
}

// Add counts one trial; an outcome outside the vocabulary is not counted.
func (t *Tally) Add(o Outcome) {
	switch o {
	case Passed:
		t.Passed++
	case Failed:
		t.Failed++
	case VerifierError:
		t.VerifierError++
	case UnscoredInfra:
		t.UnscoredInfra++
	case Cancelled:
		t.Cancelled++
	}
}

// Trials is how many trials were counted.
func (t Tally) Trials() int {
	return t.Passed + t.Failed + t.VerifierError + t.UnscoredInfra + t.Cancelled
}

// Scored is how many counted trials are scored.
func (t Tally) Scored() int { return t.Passed + t.Failed + t.VerifierError }

// PassRate is passed over scored; NaN when nothing was scored (a rate of
// nothing is no rate, not 0).
func (t Tally) PassRate() float64 {
	if t.Scored() == 0 {
		return math.NaN()
	}
	return float64(t.Passed) / float64(t.Scored())
}
