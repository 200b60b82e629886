package outcome

import (
	"math"
	"testing"
)

func TestTally(t *testing.T) {
	var tally Tally
	for _, o := range []Outcome{Passed, Passed, Failed, VerifierError, UnscoredInfra, Cancelled, "bogus"} {
		tally.Add(o)
	}
	if tally.Trials() != 6 || tally.Scored() != 4 {
		t.Fatalf("%+v: trials %d scored %d", tally, tally.Trials(), tally.Scored())
	}
	// verifier_error is scored and not passed: 2 of 4, not 2 of 3.
	if got := tally.PassRate(); got != 0.5 {
		t.Errorf("pass rate %v, want 0.5", got)
	}
	if got := (Tally{UnscoredInfra: 3}).PassRate(); !math.IsNaN(got) {
		t.Errorf("a tally with nothing scored has pass rate %v, want NaN", got)
	}
	for o, want := range map[Outcome]bool{Passed: true, Failed: true, VerifierError: true, UnscoredInfra: false, Cancelled: false, "": false} {
		if o.Scored() != want {
			t.Errorf("%q.Scored() = %v", o, !want)
		}
	}
	for o, want := range map[Outcome]bool{Passed: true, Failed: true, VerifierError: true, UnscoredInfra: true, Cancelled: true, "": false, "running": false, "PASSED": false} {
		if o.Valid() != want {
			t.Errorf("%q.Valid() = %v", o, !want)
		}
	}
}
