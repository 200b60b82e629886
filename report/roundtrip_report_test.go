package report

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// Results written by package trial, read back by report, agree with the
// job's own counting (outcome.Tally): report reads the field names trial's
// struct writes, not a fixture made to please it.
func TestRoundTripThroughTrialResults(t *testing.T) {
	job := filepath.Join(t.TempDir(), "job-rt")
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	one := 1.0
	zero := 0.0
	type spec struct {
		cond, task string
		attempt    int
		out        outcome.Outcome
		reward     *float64
		cost       float64
	}
	specs := []spec{
		{"team", "a", 1, outcome.Passed, &one, 0.10},
		{"team", "a", 2, outcome.Failed, &zero, 0.20},
		{"team", "b", 1, outcome.VerifierError, nil, 0.30},
		{"team", "b", 2, outcome.UnscoredInfra, nil, 0.40},
		{"team", "c", 1, outcome.Cancelled, nil, 0.05},
		{"team", "c", 2, outcome.Passed, &one, 0.15},
		// A roster the harness failed on every time, after paying.
		{"broken", "a", 1, outcome.UnscoredInfra, nil, 0.70},
		{"broken", "b", 1, outcome.UnscoredInfra, nil, 0.60},
		{"broken", "c", 1, outcome.Cancelled, nil, 0},
	}
	tallies := map[string]*outcome.Tally{}
	spent := map[string]float64{}
	for i, s := range specs {
		res := &trialdir.TrialResult{
			TrialName: s.task + "__" + s.cond + "__" + string(rune('0'+s.attempt)), TaskName: s.task, Attempt: s.attempt,
			Condition: s.cond, ManifestHash: s.cond + "-hash", TaskChecksum: "sum-" + s.task,
			StartedAt: start, FinishedAt: start.Add(time.Duration(30+i) * time.Second),
			CompletionReason: trial.DeclaredDone, Outcome: s.out, Reward: s.reward,
			AgentResult: trialdir.AgentResult{NInputTokens: 1000, NOutputTokens: 100, CostUSD: modelcall.USD(s.cost), NCalls: 3},
			Agents: []trialdir.AgentRecord{{ID: "lead-1", Kind: "orchestrator", Role: "lead",
				Usage: modelcall.Totals{Calls: 3, InputTokens: 1000, OutputTokens: 100, CostUSD: modelcall.USD(s.cost)}}},
		}
		// As trial writes it (writeJSON): indented, a newline at the end.
		data, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(job, res.TrialName)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "result.json"), append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		if tallies[s.cond] == nil {
			tallies[s.cond] = &outcome.Tally{}
		}
		tallies[s.cond].Add(s.out)
		spent[s.cond] += s.cost
	}

	trials, err := Load(job)
	if err != nil || len(trials) != len(specs) {
		t.Fatalf("%d trials: %v", len(trials), err)
	}
	c, err := Compare(trials, "team")
	if err != nil {
		t.Fatal(err)
	}
	for _, cd := range c.Conditions {
		want := tallies[cd.Name]
		if cd.Tally != *want || cd.Trials != want.Trials() || cd.Scored != want.Scored() {
			t.Errorf("%s: tally %+v (trials %d, scored %d), want %+v", cd.Name, cd.Tally, cd.Trials, cd.Scored, *want)
		}
		// verifier_error is scored and not passed: team is 2 of 4.
		if rate := want.PassRate(); !(math.IsNaN(rate) && math.IsNaN(cd.PassRate) || rate == cd.PassRate) {
			t.Errorf("%s: pass rate %v, want %v", cd.Name, cd.PassRate, rate)
		}
		if !near(float64(cd.TotalCostUSD), spent[cd.Name], 1e-12) {
			t.Errorf("%s: total cost %v, want %v", cd.Name, cd.TotalCostUSD, spent[cd.Name])
		}
	}
	if team := c.Conditions[1]; team.Name != "team" || team.PassRate != 0.5 || !near(float64(team.CostPerSolved), (0.10+0.20+0.30+0.15)/2, 1e-12) {
		t.Errorf("team %+v", team)
	}

	// The JSON a script reads: counts under the job's names, nulls where
	// nothing was scored.
	var buf bytes.Buffer
	if err := c.Write(&buf, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Conditions []map[string]any `json:"conditions"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, cd := range doc.Conditions {
		name := cd["condition"].(string)
		want := tallies[name]
		for key, n := range map[string]int{"n_trials": want.Trials(), "n_scored": want.Scored(), "n_passed": want.Passed, "n_failed": want.Failed,
			"n_verifier_error": want.VerifierError, "n_unscored_infra": want.UnscoredInfra, "n_cancelled": want.Cancelled} {
			if cd[key] != float64(n) {
				t.Errorf("%s: %s = %v, want %d", name, key, cd[key], n)
			}
		}
		if rate := want.PassRate(); math.IsNaN(rate) {
			for _, key := range []string{"pass_rate", "mean_reward", "cost_per_trial_mean_usd", "cost_per_trial_median_usd", "pass_at_k"} {
				if cd[key] != nil {
					t.Errorf("%s: %s = %v, want null: nothing was scored", name, key, cd[key])
				}
			}
		} else if cd["pass_rate"] != rate {
			t.Errorf("%s: pass_rate %v, want %v", name, cd["pass_rate"], rate)
		}
		if got, _ := cd["total_cost_usd"].(float64); !near(got, spent[name], 1e-12) {
			t.Errorf("%s: total_cost_usd %v, want %v", name, got, spent[name])
		}
	}
}

// TestRedoneRunsCountForTheirCost: a job that redid a trial after an
// infrastructure failure paid for both runs. troupe run's totals count both;
// so does the comparison, while only the final run counts as a trial. A run
// superseded because its inputs changed is another roster's: left out.
func TestRedoneRunsCountForTheirCost(t *testing.T) {
	job := filepath.Join(t.TempDir(), "job")
	final := trialdir.TrialResult{TrialName: "t__c__1", TaskName: "t", Attempt: 1, Condition: "c", ManifestHash: "abc", Outcome: outcome.Passed, AgentResult: trialdir.AgentResult{CostUSD: 0.25}}
	redone := final
	redone.Outcome, redone.AgentResult.CostUSD = outcome.UnscoredInfra, 0.5
	other := final
	other.ManifestHash, other.AgentResult.CostUSD = "def", 9
	for dir, r := range map[string]trialdir.TrialResult{
		"t__c__1": final,
		".superseded/t__c__1.infra-1.20261201T100000.000":      redone,
		".superseded/t__c__1.other-inputs.20261201T090000.000": other,
	} {
		data, _ := json.MarshalIndent(&r, "", "  ")
		os.MkdirAll(filepath.Join(job, dir), 0o755)
		if err := os.WriteFile(filepath.Join(job, dir, "result.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	trials, err := Load(job)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(trials, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Conditions) != 1 {
		t.Fatalf("conditions %+v: a redone or other-inputs run made a condition of its own", c.Conditions)
	}
	cd := c.Conditions[0]
	if cd.Trials != 1 || cd.Scored != 1 || cd.TotalCostUSD != 0.75 || cd.RedoneCostUSD != 0.5 {
		t.Errorf("trials %d, scored %d, total cost %v, redone cost %v; want 1, 1, 0.75, 0.5", cd.Trials, cd.Scored, cd.TotalCostUSD, cd.RedoneCostUSD)
	}
	if cd.CostPerTrialMean != 0.25 {
		t.Errorf("cost per trial %v: a redone run counted as a trial", cd.CostPerTrialMean)
	}
}
