package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// TestCompareWritesMoneyToTheMicroDollar: the comparison's amounts (its
// totals, means, medians, cost per solved, the cost's interval, the
// usage by role) come from sums and divisions that carry float noise;
// its JSON writes each to the micro-dollar.
func TestCompareWritesMoneyToTheMicroDollar(t *testing.T) {
	var agent modelcall.Totals
	for range 7 {
		agent.AddUsage(modelcall.Record{CostUSD: 0.0034}) // 0.023799999999999998
	}
	var trials []*Trial
	for i, o := range []outcome.Outcome{outcome.Passed, outcome.Passed, outcome.Failed} {
		tr := mk("team", "bbbb", fmt.Sprint("task-", i), 1, o, i+1)
		tr.AgentResult.CostUSD = agent.CostUSD
		tr.Agents = []trialdir.AgentRecord{{ID: "lead-1", Role: "lead", Usage: agent}}
		trials = append(trials, tr)
	}
	for i, cost := range []modelcall.USD{0.1, 0.2, 0.4} { // a mean of 0.23333333333333336
		tr := mk("solo", "aaaa", fmt.Sprint("task-", i), 1, outcome.Passed, i+4)
		tr.AgentResult.CostUSD = cost
		trials = append(trials, tr)
	}
	c, err := Compare(trials, "solo")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.Write(&buf, FormatJSON); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&buf)
	dec.UseNumber()
	var doc struct {
		Conditions []map[string]any `json:"conditions"`
	}
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	amounts := map[string]string{} // "<condition>.<path>" -> the number as written
	var walk func(path string, v any, money bool)
	walk = func(path string, v any, money bool) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(path+"."+k, x, money || strings.Contains(k, "cost") || strings.HasSuffix(k, "_usd"))
			}
		case json.Number:
			if money {
				amounts[path] = v.String()
			}
		}
	}
	for _, cd := range doc.Conditions {
		walk(fmt.Sprint(cd["condition"]), cd, false)
	}
	for path, n := range amounts {
		if _, decimals, _ := strings.Cut(n, "."); len(decimals) > 6 || strings.ContainsAny(n, "eE") {
			t.Errorf("%s = %s: not to the micro-dollar", path, n)
		}
	}
	for path, want := range map[string]string{
		"team.total_cost_usd":                "0.0714",
		"team.cost_per_trial_mean_usd":       "0.0238",
		"team.cost_per_trial_median_usd":     "0.0238",
		"team.cost_per_solved_usd":           "0.0357",
		"team.cost_per_trial_mean_ci95.low":  "0.0238",
		"team.cost_per_trial_mean_ci95.high": "0.0238",
		"team.by_role.lead.cost_usd":         "0.0714",
		"solo.total_cost_usd":                "0.7",
		"solo.cost_per_trial_mean_usd":       "0.233333",
		"solo.cost_per_solved_usd":           "0.233333",
	} {
		if amounts[path] != want {
			t.Errorf("%s = %q, want %s", path, amounts[path], want)
		}
	}
}
