package report

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial/outcome"
)

// richComparison is the fixture of testdata/jobs with what strains a
// report: a condition of 3 trials at 100% (on the Pareto front, with a
// wide interval), one with 5 attempts of each task (pass@k up to 5), one
// with a long name that scored nothing and spent $1, and a result that
// could not be read.
func richComparison(t *testing.T) *Comparison {
	t.Helper()
	trials, err := Load("testdata/jobs")
	if err != nil {
		t.Fatal(err)
	}
	for i, cost := range []float64{0.030, 0.034, 0.029} {
		tr := mk("three-of-three", "cccc", "hello-world", i+1, "passed", 1)
		tr.AgentResult.CostUSD = modelcall.USD(cost)
		trials = append(trials, tr)
	}
	for i, task := range []string{"csv-to-json", "fix-tests", "hello-world", "regex-log"} {
		for a := range 5 {
			out := outcome.Failed
			if (i+a)%3 != 0 {
				out = outcome.Passed
			}
			tr := mk("five-attempts", "dddd", task, a+1, out, 2+a)
			tr.AgentResult.CostUSD = 0.004 + 0.001*modelcall.USD(a)
			trials = append(trials, tr)
		}
	}
	for i := range 2 {
		tr := mk("infra-only-with-a-rather-long-condition-name", "eeee", "fix-tests", i+1, "unscored_infra", 1)
		tr.AgentResult.CostUSD = 0.50
		trials = append(trials, tr)
	}
	c, err := Compare(trials, "solo-mock")
	if err != nil {
		t.Fatal(err)
	}
	c.Skipped = []Unreadable{{Path: "jobs/job-x/t__c__9/result.json", Reason: "unexpected end of JSON input"}}
	return c
}

func TestNiceTicks(t *testing.T) {
	tests := []struct {
		top      float64
		want     []float64
		decimals int
	}{
		{0.0276, []float64{0, 0.01, 0.02, 0.03}, 2},
		{0.0221, []float64{0, 0.005, 0.01, 0.015, 0.02, 0.025}, 3},
		{1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}, 1},
		{0.3, []float64{0, 0.1, 0.2, 0.3}, 1},
		{7, []float64{0, 2, 4, 6, 8}, 0},
		{12.5, []float64{0, 5, 10, 15}, 0},
		{430, []float64{0, 100, 200, 300, 400, 500}, 0},
		{0, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}, 1}, // free (mock) models
	}
	for _, tt := range tests {
		got, dec := niceTicks(tt.top, 5)
		if !slicesNear(got, tt.want) || dec != tt.decimals {
			t.Errorf("niceTicks(%v) = %v, %d decimals; want %v, %d", tt.top, got, dec, tt.want, tt.decimals)
		}
	}
}

func slicesNear(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !near(a[i], b[i], 1e-12) {
			return false
		}
	}
	return true
}

// The Pareto chart: tick labels at round 1-2-5 steps from $0, the axis
// reaching past every interval; an interval on each axis of each point;
// a condition with nothing scored named under it. The task grid has a
// legend.
func TestHTMLReportCharts(t *testing.T) {
	c := richComparison(t)
	var buf bytes.Buffer
	if err := c.Write(&buf, FormatHTML); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	pareto := between(t, page, `aria-label="cost per trial against pass rate"`, "</svg>")
	var ticks []float64
	for _, m := range regexp.MustCompile(`class="tick xtick">\$([0-9.]+)<`).FindAllStringSubmatch(pareto, -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		ticks = append(ticks, v)
	}
	if len(ticks) < 3 || ticks[0] != 0 {
		t.Fatalf("cost ticks %v", ticks)
	}
	step := ticks[1]
	mant := step / math.Pow(10, math.Floor(math.Log10(step)))
	if !near(mant, 1, 1e-9) && !near(mant, 2, 1e-9) && !near(mant, 5, 1e-9) {
		t.Errorf("cost tick step %v is not 1, 2 or 5 times a power of ten", step)
	}
	for i, v := range ticks {
		if !near(v, float64(i)*step, 1e-9) {
			t.Errorf("cost ticks %v are not evenly stepped", ticks)
		}
	}
	top := ticks[len(ticks)-1]
	plotted := 0
	for _, cd := range c.Conditions {
		if cd.Scored == 0 {
			continue
		}
		plotted++
		if cd.CostPerTrialCI.High > top {
			t.Errorf("%s: its cost interval reaches %v, past the axis's %v", cd.Name, cd.CostPerTrialCI.High, top)
		}
	}
	if n := strings.Count(pareto, `<g class="ci2">`); n != plotted {
		t.Errorf("%d points have intervals, want %d", n, plotted)
	}
	if !strings.Contains(pareto, "three-of-three: 100.0% [43.9%, 100.0%] of 3 scored") {
		t.Error("the 3-of-3 point does not state its interval")
	}
	if !strings.Contains(page, "Not on the chart, with no scored trial: infra-only-with-a-rather-long-condition-name.") ||
		!strings.Contains(page, "no scored trial (2 trials, $1.00 spent)") {
		t.Error("the condition with nothing scored is not named by the charts")
	}
	grid := between(t, page, `aria-label="tasks by conditions"`, "</svg>")
	for _, want := range []string{`aria-label="legend"`, "none passed", "all passed", "none scored (-)", "not run", "cell: passed/scored attempts"} {
		if !strings.Contains(grid, want) {
			t.Errorf("the grid's legend lacks %q", want)
		}
	}
	// pass@k wraps between its entries, never inside one.
	if !strings.Contains(page, "@1\u00a00.") || strings.Contains(page, "@1 0.") {
		t.Error("pass@k may wrap inside an entry")
	}
	// The skipped result is named at the top.
	if i := strings.Index(page, "jobs/job-x/t__c__9/result.json"); i < 0 || i > strings.Index(page, "<table") {
		t.Error("the unreadable result is not named before the tables")
	}
}

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	if i < 0 {
		t.Fatalf("no %q", from)
	}
	j := strings.Index(s[i:], to)
	if j < 0 {
		t.Fatalf("no %q after %q", to, from)
	}
	return s[i : i+j]
}
