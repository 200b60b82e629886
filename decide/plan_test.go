package decide

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// spread is a scenario of n tasks whose baseline pass probabilities run
// evenly from lo to hi, the condition's each shifted by shift: the same
// difference on every task.
func spread(n int, lo, hi, shift float64) Scenario {
	s := Scenario{Baseline: make([]float64, n), Condition: make([]float64, n)}
	for i := range n {
		s.Baseline[i] = lo + (hi-lo)*float64(i)/float64(n-1)
		s.Condition[i] = s.Baseline[i] + shift
	}
	return s
}

// mixed is a scenario whose difference changes from task to task: a
// third of the tasks gain 3Δ/2, a third Δ, a third Δ/2 (mean Δ).
func mixed(n int, delta float64) Scenario {
	s := spread(n, 0.15, 0.5, 0)
	for i := range n {
		s.Condition[i] += delta * []float64{1.5, 1, 0.5}[i%3]
	}
	return s
}

func TestVarianceFromRates(t *testing.T) {
	// u = .6·.5 = .3, w = .5·.4 = .2: (u + w) − (u − w)² = .49.
	v, err := VarianceFromRates(0.5, 0.6)
	if err != nil || !near(v.Total(), 0.49, 1e-12) || v.Split {
		t.Errorf("%+v %v", v, err)
	}
	if _, err := VarianceFromRates(1, 1); !errors.Is(err, ErrNoVariance) {
		t.Errorf("identical certain outcomes: %v", err)
	}
	if _, err := VarianceFromRates(-0.1, 0.5); err == nil {
		t.Error("a negative rate is accepted")
	}
	s, err := v.WithICC(0.25)
	if err != nil || !near(s.Between, 0.1225, 1e-12) || !near(s.Within, 0.3675, 1e-12) || !near(s.ICC(), 0.25, 1e-12) {
		t.Errorf("WithICC: %+v %v", s, err)
	}
}

// EstimateVariance against the second implementation's one-way analysis
// of variance, and its refusals.
func TestEstimateVarianceAgainstPython(t *testing.T) {
	cases := [][]Pairs{
		{{Up: 2, Down: 0, Same: 1}, {Up: 0, Down: 1, Same: 2}, {Up: 1, Down: 1, Same: 1}, {Up: 3, Down: 0, Same: 0}},
		{{Up: 1, Down: 0, Same: 4}, {Up: 0, Down: 0, Same: 2}, {Up: 2, Down: 2, Same: 3}},                          // unequal attempts
		{{Up: 1}, {Down: 1}, {Same: 1}, {Up: 1}, {Same: 1}},                                                        // one attempt each: no split
		{{Up: 5, Same: 5}, {Up: 5, Same: 5}, {Down: 0, Same: 10}, {Up: 0, Same: 10}, {Up: 10}, {Down: 1, Same: 9}}, // a strong task effect
	}
	for i, tasks := range cases {
		got, err := EstimateVariance(tasks)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		var want struct {
			Within, Between float64
			Split           bool
		}
		python(t, "anova", map[string]any{"tasks": tasks}, &want)
		if !near(got.Within, want.Within, 1e-12) || !near(got.Between, want.Between, 1e-12) || got.Split != want.Split {
			t.Errorf("case %d: %+v, python %+v", i, got, want)
		}
	}
	if _, err := EstimateVariance([]Pairs{{Same: 4}, {Same: 3}}); !errors.Is(err, ErrNoVariance) {
		t.Errorf("no discordant pair: %v", err)
	}
	if _, err := EstimateVariance([]Pairs{{Up: 3, Down: 1}, {}}); err == nil || !strings.Contains(err.Error(), "at least 2 tasks") {
		t.Errorf("one task: %v", err)
	}
}

// The power formula against the second implementation, and the textbook
// size for pairs when tasks are many: n = (z₁₋α/₂ + z₁₋β)² σ² / Δ².
func TestPowerAgainstPythonAndTheTextbook(t *testing.T) {
	type c struct {
		Scope           Scope   `json:"scope"`
		Tasks           int     `json:"tasks"`
		Attempts        int     `json:"attempts"`
		N               int     `json:"n"`
		Between, Within float64 `json:"-"`
		Delta           float64 `json:"delta"`
		Alpha           float64 `json:"alpha"`
	}
	cases := []c{
		{ScopeTasks, 50, 7, 50, 0.05, 0.38, 0.1, 0.05},
		{ScopeTasks, 30, 3, 80, 0.05, 0.38, 0.1, 0.05},
		{ScopePopulation, 40, 2, 40, 0.05, 0.38, 0.15, 0.05},
		{ScopePopulation, 12, 5, 100, 0.01, 0.4, 0.2, 0.01},
	}
	in := make([]map[string]any, len(cases))
	for i, k := range cases {
		in[i] = map[string]any{"scope": k.Scope, "tasks": k.Tasks, "attempts": k.Attempts, "n": k.N,
			"between": k.Between, "within": k.Within, "delta": k.Delta, "alpha": k.Alpha}
	}
	var want struct {
		Cases []struct{ SE, Power float64 }
	}
	python(t, "plan", map[string]any{"cases": in}, &want)
	for i, k := range cases {
		g := Goal{Delta: k.Delta, Alpha: k.Alpha, Power: 0.8, Tasks: k.N, Scope: k.Scope}
		v := Variance{Within: k.Within, Between: k.Between, Split: true}
		se, power := g.SE(v, k.Tasks, k.Attempts), g.PowerOf(v, k.Tasks, k.Attempts)
		if !near(se, want.Cases[i].SE, 1e-12) || !near(power, want.Cases[i].Power, 1e-6) {
			t.Errorf("case %d: se %v power %v, python %+v", i, se, power, want.Cases[i])
		}
	}
}

func TestPlanTextbookSize(t *testing.T) {
	// σ² = .5, Δ = .1, α = .05, power .8: 7.849·.5/.01 = 392.4, so 393
	// pairs, on one attempt of as many tasks (the z test, tasks plenty).
	v := Variance{Within: 0.5}
	d, err := Plan(v, Goal{Delta: 0.1, Alpha: 0.05, Power: 0.8, Tasks: 1_000_000})
	want := math.Ceil(math.Pow(NormalQuantile(0.975)+NormalQuantile(0.8), 2) * 0.5 / 0.01)
	if err != nil || d.Attempts != 1 || float64(d.Tasks) != want || d.Power < 0.8 {
		t.Errorf("%+v %v, want %v tasks × 1", d, err, want)
	}
	// The t test of the clustered analysis needs a little more.
	p, err := Plan(v, Goal{Delta: 0.1, Alpha: 0.05, Power: 0.8, Tasks: 1_000_000, Scope: ScopePopulation})
	if err != nil || p.Tasks <= d.Tasks || p.Tasks > d.Tasks+3 {
		t.Errorf("population %+v %v", p, err)
	}
}

func TestPlanChoices(t *testing.T) {
	g := Goal{Delta: 0.1, Alpha: 0.05, Power: 0.8, Tasks: 50}
	pop := g
	pop.Scope = ScopePopulation
	split := Variance{Within: 0.35, Between: 0.05, Split: true}
	tests := []struct {
		name      string
		v         Variance
		g         Goal
		tasks     int // 0: all of them
		attempts  int
		unreached bool
	}{
		// These tasks: the SE² must reach (.1/2.80)² = .00128. With all
		// 50 run the between-task variance does not count, and
		// .35/(50·6) does; 48 × 6 does too, with (1 − 48/50)·.05/48 more.
		{"tasks scope", split, g, 48, 6, false},
		// Tasks like these: .05/G + .35/(G·K) reaches it with 50 × 32…
		{"population scope", split, pop, 50, 32, false},
		// …but .1/50 alone is above it: no attempts are enough.
		{"population scope, a larger effect spread", Variance{Within: 0.3, Between: 0.1, Split: true}, pop, 0, 0, true},
		// Split unknown: a plan for tasks like these may not count on
		// attempts at all (.4/G needs 314 tasks and more for the t)…
		{"no split, tasks like these", Variance{Within: 0.4}, pop, 0, 0, true},
		{"no split, many tasks", Variance{Within: 0.4}, Goal{Delta: 0.1, Alpha: 0.05, Power: 0.8, Tasks: 1000}, 314, 1, false},
		// …and one for these tasks takes the worse of the two splits,
		// max((1 − G/50)·.4/G, .4/(G·K)): 45 × 7.
		{"no split, these tasks", Variance{Within: 0.4}, g, 45, 7, false},
	}
	for _, tt := range tests {
		d, err := Plan(tt.v, tt.g)
		if tt.unreached {
			var u *UnreachableError
			if !errors.As(err, &u) || u.Best.Tasks != tt.g.Tasks || u.Best.Power >= tt.g.Power {
				t.Errorf("%s: %+v %v, want unreachable", tt.name, d, err)
			}
			continue
		}
		if err != nil || d.Tasks != tt.tasks || d.Attempts != tt.attempts || d.Power < tt.g.Power {
			t.Errorf("%s: %+v %v, want %d × %d", tt.name, d, err, tt.tasks, tt.attempts)
		}
		// Fewest pairs: one task fewer does not reach the power.
		if tt.g.PowerOf(tt.v, d.Tasks-1, d.Attempts) >= tt.g.Power {
			t.Errorf("%s: %d × %d is not the fewest", tt.name, d.Tasks, d.Attempts)
		}
	}
	if err := (Goal{Delta: 2, Alpha: 0, Power: 0.8, Tasks: 1}).Validate(); err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Errorf("every mistake at once: %v", err)
	}
	// The rounds of a job that runs all 50: .35/(50·K) needs K = 6.
	d, err := PlanRounds(split, g)
	if err != nil || d.Tasks != 50 || d.Attempts != 6 {
		t.Errorf("PlanRounds %+v %v", d, err)
	}
}

// A plan's sizes hold up in simulation: the design's simulated power is
// the plan's, within the Monte Carlo error (and the normal or t
// approximation's, 0.02), for both scopes, on scenarios whose difference
// is the same on every task and one where it changes.
func TestPlanConfirmedBySimulation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		s     Scenario
		scope Scope
	}{
		{"these tasks, same difference", spread(40, 0.1, 0.6, 0.1), ScopeTasks},
		{"these tasks, changing difference", mixed(60, 0.1), ScopeTasks},
		{"tasks like these, changing difference", mixed(300, 0.15), ScopePopulation},
	} {
		g := Goal{Delta: c.s.Delta(), Alpha: 0.05, Power: 0.8, Tasks: len(c.s.Baseline), Scope: c.scope}
		d, err := Plan(c.s.Variance(), g)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r, err := SimulateFixed(c.s, d, g, simJobs, 11)
		if err != nil {
			t.Fatal(err)
		}
		mc := 3 * math.Sqrt(d.Power*(1-d.Power)/float64(simJobs))
		if !near(r.Power(), d.Power, mc+0.02) {
			t.Errorf("%s: plan %d × %d, power %.3f; simulated %.3f (±%.3f)", c.name, d.Tasks, d.Attempts, d.Power, r.Power(), mc)
		}
		t.Logf("%s: plan %d × %d, power %.3f; simulated %.3f (%d jobs)", c.name, d.Tasks, d.Attempts, d.Power, r.Power(), simJobs)
	}
}

// A plan from a pilot, as troupe plan makes it: the pilot's variance is
// estimated, and the design it gives reaches about the power asked for on
// the scenario the pilot came from.
func TestPlanFromAPilot(t *testing.T) {
	t.Parallel()
	s := mixed(60, 0.1)
	tasks := make([]Pairs, len(s.Baseline))
	for _, o := range s.Outcomes(4, 5) {
		tasks[o.Task].Add(o.Condition, o.Baseline)
	}
	v, err := EstimateVariance(tasks)
	if err != nil {
		t.Fatal(err)
	}
	g := Goal{Delta: 0.1, Alpha: 0.05, Power: 0.8, Tasks: 60}
	d, err := Plan(v, g)
	if err != nil {
		t.Fatal(err)
	}
	r, err := SimulateFixed(s, d, g, simJobs, 3)
	if err != nil {
		t.Fatal(err)
	}
	// The pilot's 240 pairs estimate the variance to about ±10%, which
	// moves the power by a few points.
	if !near(r.Power(), 0.8, 0.08) {
		t.Errorf("pilot variance %+v (truth %+v): plan %d × %d, simulated power %.3f", v, s.Variance(), d.Tasks, d.Attempts, r.Power())
	}
	t.Logf("pilot variance %+v (truth %+v): plan %d × %d, simulated power %.3f", v, s.Variance(), d.Tasks, d.Attempts, r.Power())
}

func TestSpend(t *testing.T) {
	p := PerTrial{CostUSD: 0.25, Wall: 90 * time.Second}
	s := p.Spend(40).Plus(PerTrial{CostUSD: 0.1, Wall: time.Minute}.Spend(40))
	if s.Trials != 80 || !near(float64(s.CostUSD), 14, 1e-9) || s.Wall != 100*time.Minute {
		t.Errorf("%+v", s)
	}
}
