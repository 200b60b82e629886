package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/decide"
)

// planCmd runs troupe plan in process, as troupe's run does (the same exit
// codes), without needing it registered on the root command.
func planCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newPlanCmd(newApp(&out, &errOut))
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{command: c.CommandPath(), err: err} })
	err := cmd.ExecuteContext(t.Context())
	var reported *reportedError
	var usage *usageError
	switch {
	case err == nil:
		return exitOK, out.String(), errOut.String()
	case errors.As(err, &reported):
		return reported.code, out.String(), errOut.String()
	case errors.As(err, &usage):
		return exitUsage, out.String(), err.Error()
	}
	return exitFailed, out.String(), err.Error()
}

// pilotScenario is the truth a hand-made pilot is drawn from: 24 tasks,
// the baseline passing 20% to 70% of the time, the team 15 points more on
// every task.
func pilotScenario() decide.Scenario {
	s := decide.Scenario{}
	for i := range 24 {
		b := 0.2 + 0.5*float64(i)/23
		s.Baseline = append(s.Baseline, b)
		s.Condition = append(s.Condition, b+0.15)
	}
	return s
}

// writePilot writes a pilot job folder by hand, as troupe run would: one
// result.json per trial of solo (the baseline) and team, 3 attempts of
// each task, from the scenario, with a cost and a wall time per trial.
func writePilot(t *testing.T, s decide.Scenario) string {
	t.Helper()
	job := filepath.Join(t.TempDir(), "job-pilot")
	write(t, filepath.Join(job, "result.json"), `{"id":"job-pilot","n_total_trials":144}`)
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, o := range s.Outcomes(3, 7) {
		for _, side := range []struct {
			cond, hash string
			passed     bool
			cost       float64
			wall       time.Duration
		}{
			{"solo", strings.Repeat("a", 64), o.Baseline, 0.02, time.Minute},
			{"team", strings.Repeat("b", 64), o.Condition, 0.05, 2 * time.Minute},
		} {
			out, reward := "failed", 0
			if side.passed {
				out, reward = "passed", 1
			}
			task := fmt.Sprintf("task-%02d", o.Task)
			name := fmt.Sprintf("%s__%s__%d", task, side.cond, o.Attempt)
			write(t, filepath.Join(job, name, "result.json"), fmt.Sprintf(
				`{"trial_name":%q,"task_name":%q,"attempt":%d,"condition":%q,"manifest_sha256":%q,"outcome":%q,"reward":%d,`+
					`"started_at":%q,"finished_at":%q,"agent_result":{"cost_usd":%g}}`,
				name, task, o.Attempt, side.cond, side.hash, out, reward,
				start.Format(time.RFC3339), start.Add(side.wall).Format(time.RFC3339), side.cost))
		}
	}
	return job
}

type planJSON struct {
	Goal       decide.Goal `json:"goal"`
	Baseline   string      `json:"baseline"`
	Conditions []struct {
		Condition  string          `json:"condition"`
		PilotPairs int             `json:"pilot_pairs"`
		Variance   decide.Variance `json:"variance"`
		Design     *decide.Design  `json:"design"`
		Spend      *decide.Spend   `json:"spend"`
		Error      string          `json:"error"`
	} `json:"conditions"`
	Job *struct {
		Tasks, Attempts int
		Spend           *decide.Spend
	} `json:"job"`
	Notes []string `json:"notes"`
}

// troupe plan on a pilot prints sizes that a simulation of the pilot's
// own truth confirms: the design's simulated power is the power asked for,
// within the Monte Carlo error and what a pilot of 72 pairs can know.
func TestPlanOnAPilot(t *testing.T) {
	s := pilotScenario()
	job := writePilot(t, s)
	for _, scope := range []decide.Scope{decide.ScopePopulation, decide.ScopeTasks} {
		code, out, errOut := planCmd(t, job, "--delta", "0.15", "--scope", string(scope), "--format", "json")
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s%s", scope, code, out, errOut)
		}
		var got planJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if got.Baseline != "solo" || len(got.Conditions) != 1 || got.Goal.Tasks != 24 || got.Goal.Scope != scope {
			t.Fatalf("%s: %+v", scope, got)
		}
		c := got.Conditions[0]
		d := c.Design
		if c.PilotPairs != 72 || d == nil || d.Power < 0.8 || d.Tasks > 24 || !c.Variance.Split {
			t.Fatalf("%s: %+v", scope, c)
		}
		// Cost: both sides' trials at the pilot's cost per scored trial.
		if c.Spend == nil || c.Spend.Trials != 2*d.Pairs() || !near(float64(c.Spend.CostUSD), float64(d.Pairs())*0.07, 1e-9) || c.Spend.Wall != time.Duration(d.Pairs())*3*time.Minute {
			t.Errorf("%s: spend %+v for %d pairs", scope, c.Spend, d.Pairs())
		}
		if got.Job == nil || got.Job.Tasks != d.Tasks || got.Job.Attempts != d.Attempts {
			t.Errorf("%s: job %+v", scope, got.Job)
		}
		// The sizes hold for the variance the pilot measured: simulated on
		// a benchmark with that variance, the design has the power the
		// plan states, within the Monte Carlo error (3 standard errors)
		// and the approximation's 0.02.
		measured := scenarioWithVariance(t, got.Goal.Tasks, 0.15, c.Variance)
		r, err := decide.SimulateFixed(measured, *d, got.Goal, 2000, 99)
		if err != nil {
			t.Fatal(err)
		}
		mc := 3 * math.Sqrt(d.Power*(1-d.Power)/2000)
		if !near(r.Power(), d.Power, mc+0.02) {
			t.Errorf("%s: plan %d × %d, power %.3f; simulated with the pilot's variance %+v: %.3f (±%.3f)", scope, d.Tasks, d.Attempts, d.Power, c.Variance, r.Power(), mc)
		}
		// And on the truth the pilot was drawn from, up to what a pilot
		// of 72 pairs can know of it (its variance to about ±15%).
		truth, err := decide.SimulateFixed(s, *d, got.Goal, 2000, 98)
		if err != nil {
			t.Fatal(err)
		}
		if !near(truth.Power(), 0.8, 0.12) {
			t.Errorf("%s: plan %d × %d (pilot variance %+v, truth %+v): simulated power %.3f", scope, d.Tasks, d.Attempts, c.Variance, s.Variance(), truth.Power())
		}
		t.Logf("%s: plan %d × %d, power %.3f; simulated with the pilot's variance %.3f, on the pilot's truth %.3f", scope, d.Tasks, d.Attempts, d.Power, r.Power(), truth.Power())
	}
	code, out, _ := planCmd(t, job, "--delta", "0.15")
	for _, want := range []string{"Plan: detect a difference of 15 pp in pass rate against solo", "team ", "72 (24)", "One job for all", "Other designs", "tasks × attempts"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("table (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// scenarioWithVariance is a benchmark of n tasks (n even) whose true mean
// difference is delta and whose true variances are v's: the condition
// gains delta ± √Between on alternate tasks, over a baseline rate p
// chosen (by bisection) so that the variance within tasks is v.Within.
func scenarioWithVariance(t *testing.T, n int, delta float64, v decide.Variance) decide.Scenario {
	t.Helper()
	s := math.Sqrt(v.Between)
	build := func(p float64) decide.Scenario {
		var sc decide.Scenario
		for i := range n {
			sc.Baseline = append(sc.Baseline, p)
			sc.Condition = append(sc.Condition, p+delta+s*float64(1-2*(i%2)))
		}
		return sc
	}
	// The variance within tasks rises with p up to about 0.5 − delta/2.
	lo, hi := s, 0.5-delta/2
	if build(hi).Variance().Within < v.Within {
		t.Fatalf("no scenario has a variance within tasks of %v", v.Within)
	}
	for range 60 {
		mid := (lo + hi) / 2
		if build(mid).Variance().Within < v.Within {
			lo = mid
		} else {
			hi = mid
		}
	}
	sc := build((lo + hi) / 2)
	if got := sc.Variance(); !near(got.Within, v.Within, 1e-9) || !near(got.Between, v.Between, 1e-9) || !near(sc.Delta(), delta, 1e-9) {
		t.Fatalf("scenario %+v, want %+v", got, v)
	}
	return sc
}

// With stated pass rates the sizes are decide's from the rates, one
// attempt per task for tasks like these (the split is not known).
func TestPlanFromStatedRates(t *testing.T) {
	code, out, errOut := planCmd(t, "--pass-rates", "solo=0.5,team=0.6,duo=0.7", "--tasks", "1000", "--delta", "0.1", "--format", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got planJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	v, _ := decide.VarianceFromRates(0.5, 0.6)
	want, _ := decide.Plan(v, decide.Goal{Delta: 0.1, Alpha: 0.05, Power: 0.8, Tasks: 1000, Scope: decide.ScopePopulation})
	if got.Baseline != "solo" || len(got.Conditions) != 2 || got.Conditions[0].Design == nil || *got.Conditions[0].Design != want || want.Attempts != 1 {
		t.Errorf("%+v, want %+v", got.Conditions, want)
	}
	if got.Conditions[0].Spend != nil || got.Job == nil || got.Job.Spend != nil || len(got.Notes) == 0 {
		t.Errorf("stated rates have no cost, and a note on the split: %+v", got)
	}
	// Too few tasks for the difference: said, and exit 1.
	code, out, _ = planCmd(t, "--pass-rates", "solo=0.5,team=0.6", "--tasks", "50", "--delta", "0.1")
	if code != exitFailed || !strings.Contains(out, "team: no design of at most 50 tasks") {
		t.Errorf("unreachable: exit %d\n%s", code, out)
	}
}

func TestPlanUsage(t *testing.T) {
	job := writePilot(t, pilotScenario())
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--delta", "0.1"}, exitUsage, "give pilot job folders, or --pass-rates"},
		{[]string{job, "--pass-rates", "a=0.1,b=0.2", "--delta", "0.1"}, exitUsage, "not both"},
		{[]string{job}, exitUsage, "--delta, the difference to detect, is required"},
		{[]string{job, "--delta", "0.1", "--format", "pdf"}, exitUsage, `--format "pdf"`},
		{[]string{job, "--delta", "0.1", "--scope", "galaxy"}, exitUsage, `scope "galaxy"`},
		{[]string{"--pass-rates", "a=0.1,b=0.2", "--delta", "0.1"}, exitUsage, "--pass-rates needs --tasks"},
		{[]string{"--pass-rates", "a=0.1", "--tasks", "9", "--delta", "0.1"}, exitFailed, "at least one other condition"},
		{[]string{"--pass-rates", "a=x,b=0.2", "--tasks", "9", "--delta", "0.1"}, exitFailed, "each entry is name=rate"},
		{[]string{job, "--delta", "0.1", "--baseline", "nobody"}, exitFailed, `no condition "nobody"`},
		{[]string{job, "--delta", "0.1", "--icc", "2"}, exitFailed, ""},
		{[]string{t.TempDir(), "--delta", "0.1"}, exitFailed, "holds no trial results"},
	} {
		code, out, errOut := planCmd(t, c.args...)
		if code != c.code || !strings.Contains(errOut+out, c.want) {
			t.Errorf("%v: exit %d, %q %q", c.args, code, errOut, out)
		}
	}
}
