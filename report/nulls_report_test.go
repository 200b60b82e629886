package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// noScored is a comparison with a condition that spent money on trials the
// harness failed and scored none: "broken" ran 3 unscored_infra trials at
// $0.25 and a cancelled one at $0.05; "ok" passed twice.
func noScored(t *testing.T) *Comparison {
	t.Helper()
	var trials []*Trial
	for i := range 3 {
		tr := mk("broken", "bbbb", "t", i+1, "unscored_infra", 1)
		tr.AgentResult.CostUSD = 0.25
		trials = append(trials, tr)
	}
	cancelled := mk("broken", "bbbb", "t", 4, "cancelled", 1)
	cancelled.AgentResult.CostUSD = 0.05
	trials = append(trials, cancelled, mk("ok", "aaaa", "t", 1, "passed", 2), mk("ok", "aaaa", "t", 2, "passed", 3))
	c, err := Compare(trials, "ok")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A condition with no scored trial has no pass rate, mean reward, cost per
// trial or pass@k: JSON says null, not 0, and tables say "-"; its real
// spend is shown.
func TestNothingScoredIsNullNotZero(t *testing.T) {
	c := noScored(t)
	var buf bytes.Buffer
	if err := c.Write(&buf, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Conditions []map[string]any `json:"conditions"`
		Paired     []map[string]any `json:"paired"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var broken map[string]any
	for _, cd := range doc.Conditions {
		if cd["condition"] == "broken" {
			broken = cd
		}
	}
	if broken == nil {
		t.Fatalf("no condition broken in %s", buf.String())
	}
	for _, key := range []string{"pass_rate", "mean_reward", "cost_per_trial_mean_usd", "cost_per_trial_median_usd", "cost_per_solved_usd", "pass_at_k", "wall_mean_ns", "wall_median_ns"} {
		if v, ok := broken[key]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null", key, v, ok)
		}
	}
	for _, key := range []string{"pass_rate_ci95", "cost_per_trial_mean_ci95"} {
		ci, _ := broken[key].(map[string]any)
		if ci == nil || ci["low"] != nil || ci["high"] != nil {
			t.Errorf("%s = %v, want {low: null, high: null}", key, broken[key])
		}
	}
	for key, want := range map[string]float64{"n_trials": 4, "n_scored": 0, "n_unscored_infra": 3, "n_cancelled": 1, "n_passed": 0} {
		if broken[key] != want {
			t.Errorf("%s = %v, want %v", key, broken[key], want)
		}
	}
	if got, _ := broken["total_cost_usd"].(float64); !near(got, 0.80, 1e-9) {
		t.Errorf("total_cost_usd = %v, want 0.80: every trial was paid for", broken["total_cost_usd"])
	}
	// No pair: no difference and no test.
	if p := doc.Paired[0]; p["pass_rate_diff"] != nil || p["mcnemar_exact_p"] != nil {
		t.Errorf("paired with nothing scored: %v", p)
	}

	for _, format := range []string{FormatTable, FormatMarkdown, FormatHTML} {
		buf.Reset()
		if err := c.Write(&buf, format); err != nil {
			t.Fatal(err)
		}
		row := conditionRow(t, buf.String(), "broken", format)
		if !strings.Contains(row, "$0.8000") {
			t.Errorf("%s: the row of broken does not show its spend, $0.8000:\n%s", format, row)
		}
		for _, zero := range []string{"0.0%", "$0.0000", "0.000", "100.0%"} {
			if strings.Contains(row, zero) {
				t.Errorf("%s: the row of broken shows %q for a figure of nothing:\n%s", format, zero, row)
			}
		}
	}
}

// conditionRow is the line (or HTML table row) of the conditions table
// that starts with the condition's name.
func conditionRow(t *testing.T, out, name, format string) string {
	t.Helper()
	starts := map[string]string{FormatTable: name + " ", FormatMarkdown: "| " + name + " |", FormatHTML: `">` + name + `</td>`}
	for line := range strings.SplitSeq(out, "\n") {
		if i := strings.Index(line, starts[format]); i >= 0 && (format == FormatHTML || i == 0) && strings.Count(line, "$") > 0 {
			return line
		}
	}
	t.Fatalf("%s: no row of %s in\n%s", format, name, out)
	return ""
}
