package decide_test

import (
	"encoding/json"
	"fmt"

	"github.com/troupebench/troupe/decide"
)

// A job runner's use of a sequential test: size the fixed design the test
// is measured against, start the test, add each round's pairs, stop the
// condition when the test has ended, and save the test with the job so a
// resumed job continues it.
func Example() {
	// The fixed design: 40 tasks, from a pilot's variance (here stated).
	v := decide.Variance{Within: 0.4, Split: true}
	fixed, err := decide.PlanRounds(v, decide.Goal{Delta: 0.15, Alpha: 0.05, Power: 0.8, Tasks: 40, Scope: decide.ScopeTasks})
	if err != nil {
		panic(err)
	}
	test, err := decide.NewTest(decide.Params{Alpha: 0.05, Delta: 0.15, MaxRounds: 2 * fixed.Attempts,
		FixedRounds: fixed.Attempts, PriorVariance: v.Total(), Futility: 0.2})
	if err != nil {
		panic(err)
	}
	// Each round: one pair per task both conditions scored.
	for round := 1; !test.Ended(); round++ {
		var pairs decide.Pairs
		for task := range 40 {
			condition, baseline := task%4 != 0, task%2 == 0 // the job's outcomes
			pairs.Add(condition, baseline)
		}
		if _, err := test.Add(round, pairs); err != nil {
			panic(err)
		}
		// Saved with the job after every round…
		data, _ := json.Marshal(test)
		// …and restored on resume: the same sequence, round after round.
		test = &decide.Test{}
		if err := json.Unmarshal(data, test); err != nil {
			panic(err)
		}
	}
	d := test.Decision()
	fmt.Printf("fixed design: %d rounds\n", fixed.Attempts)
	fmt.Printf("%s at round %d, interval (%.3f, %.3f), saved %d rounds\n", d.Verdict, d.Round, d.Interval.Low, d.Interval.High, *d.SavedRounds)
	// Output:
	// fixed design: 4 rounds
	// better at round 3, interval (0.028, 0.458), saved 1 rounds
}
