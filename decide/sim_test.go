package decide

import (
	"math"
	"testing"
)

// alternating is a scenario whose tasks differ but whose mean difference
// is 0: the condition gains gain on half the tasks and loses it on the
// others. It is the null the sequence's validity argument is about (the
// mean, not every task, is 0).
func alternating(n int, gain float64) Scenario {
	s := spread(n, gain, 1-gain, 0)
	for i := range n {
		s.Condition[i] += gain * float64(1-2*(i%2))
	}
	return s
}

// mcError is three Monte Carlo standard errors of a rate p from jobs.
func mcError(p float64, jobs int) float64 { return 3 * math.Sqrt(p*(1-p)/float64(jobs)) }

// seqSetup is a sequential job and its fixed design for a benchmark of n
// tasks and a margin Δ, as jobSetup makes them for tasks whose baseline
// pass rates run from 0.1 to 0.6 and that all gain Δ.
func seqSetup(t *testing.T, n int, delta float64, futility float64) (Params, Design) {
	t.Helper()
	return jobSetup(t, spread(n, 0.1, 0.6, delta), delta, futility)
}

// jobSetup is a sequential job and its fixed design for the tasks of
// alt, a scenario with a difference of Δ: the fixed design is PlanRounds
// (power 0.8, these tasks) from alt's true variance, the job's max twice
// its rounds, and its prior variance the plan's.
func jobSetup(t *testing.T, alt Scenario, delta float64, futility float64) (Params, Design) {
	t.Helper()
	d, err := PlanRounds(alt.Variance(), Goal{Delta: delta, Alpha: 0.05, Power: 0.8, Tasks: len(alt.Baseline)})
	if err != nil {
		t.Fatal(err)
	}
	return Params{Alpha: 0.05, Delta: delta, MaxRounds: 2 * d.Attempts, FixedRounds: d.Attempts,
		PriorVariance: alt.Variance().Total(), Futility: futility}, d
}

// logSequential logs one simulated scenario as a row of the table in
// docs/compare.md.
func logSequential(t *testing.T, tasks int, name string, p Params, r SequentialResult) {
	t.Helper()
	t.Logf("%d tasks | fixed %d | %s | β %.2f | better %.3f, worse %.3f, equivalent %.3f, not better %.3f, undecided %.3f | mean rounds %.2f (%.2f× fixed, ±%.2f) | false %.4f",
		tasks, p.FixedRounds, name, p.Futility, r.Rate(Better), r.Rate(Worse), r.Rate(Equivalent), r.Rate(NotBetter), r.Rate(Undecided),
		r.MeanRounds, r.MeanRounds/float64(p.FixedRounds), 3*r.SDRounds/math.Sqrt(float64(r.Jobs))/float64(p.FixedRounds), r.FalseRate())
}

// Under the null, simulated sequential jobs decide falsely (better or
// worse) at most α of the time, within the Monte Carlo error, though
// they look after every round: with the same difference on every task,
// with differences that cancel (slightly, and strongly: the case the
// arithmetic-geometric mean argument is for), with the futility stop,
// with few tasks, and with no prior variance (the bets then start small
// and follow the pairs' discordance).
func TestSequentialNullKeepsAlpha(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		s        Scenario
		futility float64
		noPrior  bool
	}{
		{"no difference", spread(50, 0.1, 0.6, 0), 0, false},
		{"differences ±0.2 that cancel", alternating(50, 0.2), 0, false},
		{"differences ±0.4 that cancel", alternating(50, 0.4), 0, false},
		{"no difference, futility stop", spread(50, 0.1, 0.6, 0), 0.2, false},
		{"no difference, few tasks", spread(10, 0.2, 0.7, 0), 0, false},
		{"differences ±0.4 that cancel, few tasks", alternating(10, 0.4), 0, false},
		{"no difference, no prior variance", spread(20, 0.1, 0.6, 0), 0, true},
	} {
		p, _ := seqSetup(t, len(c.s.Baseline), 0.1, c.futility)
		if c.noPrior {
			p.PriorVariance = 0
		}
		r, err := SimulateSequential(c.s, p, simJobs, 21)
		if err != nil {
			t.Fatal(err)
		}
		if limit := p.Alpha + mcError(p.Alpha, simJobs); r.FalseRate() > limit {
			t.Errorf("%s: false decisions %.4f > %.4f", c.name, r.FalseRate(), limit)
		}
		logSequential(t, len(c.s.Baseline), c.name, p, r)
	}
}

// Under a true difference of Δ, with the futility stop at β = 1 − the
// plan's power and a max of twice the fixed design's rounds, simulated
// jobs decide Better about as often as the fixed design of PlanRounds
// detects the difference, in fewer rounds on average: the bets are sized
// for Δ, which makes the test Wald's (docs/compare.md). So they do when
// the tasks' differences vary about Δ, and when the job has no prior
// variance. A looser futility level saves more rounds for a little
// power; without the futility stop the test decides Better more often,
// in about the fixed design's rounds. Larger differences take far fewer
// rounds, and under none the futility stop ends the job in about half the
// fixed design's.
func TestSequentialPowerAndSaving(t *testing.T) {
	t.Parallel()
	const delta = 0.1
	// The most rounds on average at a difference of Δ, of the fixed
	// design's (measured: 0.80–0.85, 0.86, 0.94): the fewer rounds the
	// fixed design has, the less looking after each one saves.
	ratio := map[int]float64{10: 0.88, 20: 0.91, 50: 0.98}
	for _, n := range []int{10, 20, 50} {
		alt := spread(n, 0.1, 0.6, delta)
		p, d := seqSetup(t, n, delta, 0.2)
		fixed, err := SimulateFixed(alt, d, Goal{Delta: delta, Alpha: 0.05, Power: 0.8, Tasks: n}, simJobs, 31)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d tasks, Δ = %.2f: fixed design %d × %d rounds, plan power %.3f, simulated %.3f", n, delta, n, d.Attempts, d.Power, fixed.Power())
		// uneven gains 2Δ on half the tasks and nothing on the others.
		uneven := spread(n, 0.1, 0.6, 0)
		for i := range n {
			uneven.Condition[i] += 2 * delta * float64(1-i%2)
		}
		for _, c := range []struct {
			name     string
			s        Scenario
			futility float64
			noPrior  bool
			power    float64 // the least share decided Better, less the plan's power (−1: unchecked)
			ratio    float64 // the most rounds on average, of the fixed design's (0: unchecked)
		}{
			{"difference Δ", alt, 0.2, false, -0.05, ratio[n]},
			{"difference Δ, differing tasks", uneven, 0.2, false, -0.05, ratio[n]},
			{"difference Δ, no prior variance", alt, 0.2, true, -0.05, 1},
			{"difference Δ, looser futility", alt, 0.3, false, -0.06, ratio[n] - 0.06},
			{"difference Δ, no futility stop", alt, 0, false, 0, 1.1},
			{"difference 1.5Δ", spread(n, 0.1, 0.6, 1.5*delta), 0.2, false, 0.97 - d.Power, 0.6},
			{"difference 2Δ", spread(n, 0.1, 0.6, 2*delta), 0.2, false, 0.99 - d.Power, 0.45},
			{"no difference", spread(n, 0.1, 0.6, 0), 0.2, false, -1, 0.65},
			{"no difference, no futility stop", spread(n, 0.1, 0.6, 0), 0, false, -1, 0},
		} {
			// The job's plan is the one for a difference of Δ on its
			// tasks, made before the truth is known (uneven's tasks have
			// their own).
			q, plan := p, d
			if c.name == "difference Δ, differing tasks" {
				q, plan = jobSetup(t, uneven, delta, 0)
			}
			q.Futility = c.futility
			if c.noPrior {
				q.PriorVariance = 0
			}
			r, err := SimulateSequential(c.s, q, simJobs, 41)
			if err != nil {
				t.Fatal(err)
			}
			ratio, power := r.MeanRounds/float64(q.FixedRounds), r.Rate(Better)
			mc := mcError(max(power, 0.05), simJobs)
			// The bounds are for 2,000 jobs; fewer (under the race
			// detector) have a larger Monte Carlo error.
			slack := 3 * r.SDRounds / math.Sqrt(float64(simJobs)) / float64(q.FixedRounds)
			if simJobs >= 2000 {
				slack = 0
			}
			if c.ratio > 0 && ratio > c.ratio+slack {
				t.Errorf("%d tasks, %s, futility %.2f: %.2f of the fixed design's rounds, want at most %.2f", n, c.name, c.futility, ratio, c.ratio)
			}
			if want := plan.Power + c.power; c.power > -1 && power < want-mc {
				t.Errorf("%d tasks, %s, futility %.2f: better %.3f, want at least %.3f (−%.3f)", n, c.name, c.futility, power, want, mc)
			}
			// False: better or worse under the null, worse or equivalent
			// (α) or not better (β) under a difference.
			if limit := q.Alpha + q.Futility + mc; r.FalseRate() > limit {
				t.Errorf("%d tasks, %s: false decisions %.4f > %.4f", n, c.name, r.FalseRate(), limit)
			}
			logSequential(t, n, c.name, q, r)
		}
	}
}
