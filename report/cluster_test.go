package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/trial/outcome"
)

// clusterPython runs testdata/cluster_check.py, the second
// implementation, or skips the test without python3.
func clusterPython(t *testing.T, clusters []Cluster, lo, hi float64) (se float64, cr1, boot Interval) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH: the check against the second implementation (testdata/cluster_check.py) needs it")
	}
	in := map[string]any{"lo": lo, "hi": hi, "clusters": [][2]float64{}}
	var cs [][2]float64
	for _, c := range clusters {
		cs = append(cs, [2]float64{c.Sum, float64(c.N)})
	}
	in["clusters"] = cs
	data, _ := json.Marshal(in)
	cmd := exec.CommandContext(t.Context(), py, "testdata/cluster_check.py")
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 testdata/cluster_check.py: %v\n%s", err, stderr.String())
	}
	var out struct {
		SE        float64    `json:"se"`
		CR1       [2]float64 `json:"cr1"`
		Bootstrap [2]float64 `json:"bootstrap"`
	}
	if err := json.Unmarshal(outb, &out); err != nil {
		t.Fatal(err)
	}
	return out.SE, Interval{out.CR1[0], out.CR1[1]}, Interval{out.Bootstrap[0], out.Bootstrap[1]}
}

// The CR1 standard error and interval to 1e-9, and the task bootstrap to
// its Monte Carlo error, against the second implementation: pass rates
// (values 0 and 1) and paired differences (−1, 0, 1), balanced and not.
func TestClusteredAgainstPython(t *testing.T) {
	cases := []struct {
		name     string
		clusters []Cluster
		lo, hi   float64
	}{
		{"the fixture's solo pass rate", []Cluster{{1, 3}, {0, 3}, {3, 3}, {0, 2}}, 0, 1},
		{"twelve tasks of five", []Cluster{{2, 5}, {3, 5}, {5, 5}, {0, 5}, {1, 5}, {4, 5}, {2, 5}, {2, 5}, {3, 5}, {5, 5}, {1, 5}, {0, 5}}, 0, 1},
		{"unequal attempts", []Cluster{{1, 1}, {2, 4}, {7, 9}, {0, 2}, {3, 3}, {1, 6}, {4, 7}}, 0, 1},
		{"paired differences", []Cluster{{2, 3}, {0, 3}, {-1, 3}, {1, 2}, {3, 3}, {0, 3}, {1, 3}, {-2, 3}, {2, 2}, {1, 3}}, -1, 1},
	}
	for _, c := range cases {
		se, cr1, boot := clusterPython(t, c.clusters, c.lo, c.hi)
		if got := ClusterRobustSE(c.clusters); !near(got, se, 1e-12) {
			t.Errorf("%s: CR1 SE %v, python %v", c.name, got, se)
		}
		if got := CR1Interval(c.clusters, c.lo, c.hi); !near(got.Low, cr1.Low, 1e-7) || !near(got.High, cr1.High, 1e-7) {
			t.Errorf("%s: CR1 interval %v, python %v", c.name, got, cr1)
		}
		// 10,000 resamples against python's 40,000: a percentile moves
		// by about 0.01 from one set of resamples to another.
		if got := ClusterBootstrap(c.clusters, BootstrapResamples, BootstrapSeed); !near(got.Low, boot.Low, 0.025) || !near(got.High, boot.High, 0.025) {
			t.Errorf("%s: task bootstrap %v, python %v", c.name, got, boot)
		}
	}
}

// With one trial per task, the tasks are the trials: the CR1 standard
// error is the usual one of a mean, s/√n, and the task bootstrap is the
// plain bootstrap's distribution.
func TestClusteredWithOneTrialPerTask(t *testing.T) {
	values := []float64{1, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 1}
	clusters := make([]Cluster, len(values))
	for i, v := range values {
		clusters[i] = Cluster{v, 1}
	}
	n := float64(len(values))
	m := mean(values)
	s2 := 0.0
	for _, v := range values {
		s2 += (v - m) * (v - m)
	}
	s2 /= n - 1
	if got := ClusterRobustSE(clusters); !near(got, math.Sqrt(s2/n), 1e-12) {
		t.Errorf("SE %v, want s/√n = %v", got, math.Sqrt(s2/n))
	}
	if math.IsNaN(ClusterRobustSE(clusters[:1])) != true || !math.IsNaN(ClusterBootstrap(clusters[:1], 100, 1).Low) {
		t.Error("one task gives a clustered interval")
	}
	a, b := ClusterBootstrap(clusters, BootstrapResamples, BootstrapSeed), ClusterBootstrap(clusters, BootstrapResamples, BootstrapSeed)
	if a != b || a.Low >= m || a.High <= m {
		t.Errorf("bootstrap %v then %v around %v", a, b, m)
	}
}

// Which interval leads, per row, as IntervalPolicy says.
func TestHeadlineChoice(t *testing.T) {
	var trials []*Trial
	add := func(cond, task string, attempt int, o outcome.Outcome) {
		trials = append(trials, mk(cond, cond+"-hash", task, attempt, o, attempt))
	}
	for i := range 6 {
		task := fmt.Sprint("t", i)
		// once: one attempt per task
		add("once", task, 1, []outcome.Outcome{outcome.Passed, outcome.Failed}[i%2])
		// thrice: three attempts of each task
		for a := 1; a <= 3; a++ {
			add("thrice", task, a, []outcome.Outcome{outcome.Passed, outcome.Failed}[(i+a)%2])
			add("all", task, a, outcome.Passed)
		}
	}
	add("single", "t0", 1, outcome.Passed)
	add("single", "t0", 2, outcome.Failed)
	c, err := Compare(trials, "thrice")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"once": IntervalWilson, "thrice": IntervalCR1, "all": IntervalWilson, "single": IntervalWilson}
	why := map[string]string{"once": "one of the scored attempts per task", "thrice": "a task has 3 scored attempts", "all": "same mean", "single": "one task"}
	for _, cd := range c.Conditions {
		h := cd.PassRateHeadline
		if h.Interval != want[cd.Name] || !strings.Contains(h.Why, why[cd.Name]) {
			t.Errorf("%s: headline %+v, want %s (%s)", cd.Name, h, want[cd.Name], why[cd.Name])
		}
		if h.Interval == IntervalWilson && h.CI != cd.PassRateCI || h.Interval == IntervalCR1 && h.CI != cd.PassRateClustered.CR1 {
			t.Errorf("%s: headline interval %v is not the %s one", cd.Name, h.CI, h.Interval)
		}
	}
	for _, p := range c.Paired {
		wantDiff := map[string]string{"once": IntervalPairedBootstrap, "all": IntervalCR1, "single": IntervalPairedBootstrap}[p.Condition]
		if p.DiffHeadline.Interval != wantDiff {
			t.Errorf("%s against thrice: %+v, want %s", p.Condition, p.DiffHeadline, wantDiff)
		}
	}
}

// The new fields are in the JSON beside the old, which keep their names
// and meaning (pass_rate_ci95 is still Wilson's); a condition with
// nothing scored has null clustered figures.
func TestClusteredJSON(t *testing.T) {
	c := fixture(t)
	c.Conditions = append(c.Conditions, summarize("broken", "name:broken", []*Trial{mk("broken", "", "t", 1, outcome.UnscoredInfra, 1)}))
	var buf bytes.Buffer
	if err := c.Write(&buf, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var out struct {
		IntervalPolicy string `json:"interval_policy"`
		Conditions     []map[string]json.RawMessage
		Paired         []map[string]json.RawMessage
	}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.IntervalPolicy, "task-clustered") {
		t.Errorf("interval policy %q", out.IntervalPolicy)
	}
	solo := out.Conditions[0]
	var wilson struct {
		Low, High float64
	}
	json.Unmarshal(solo["pass_rate_ci95"], &wilson)
	if w := Wilson(4, 11); !near(wilson.Low, w.Low, 1e-12) || !near(wilson.High, w.High, 1e-12) {
		t.Errorf("pass_rate_ci95 %v is no longer Wilson's %v", wilson, w)
	}
	var h struct {
		Interval string
		CI       struct{ Low, High float64 } `json:"ci95"`
		Why      string
	}
	json.Unmarshal(solo["pass_rate_headline"], &h)
	if h.Interval != IntervalCR1 || h.Why == "" || !(h.CI.Low < wilson.Low) {
		t.Errorf("pass_rate_headline %s", solo["pass_rate_headline"])
	}
	for _, key := range []string{"n_tasks", "max_attempts_per_task", "cr1_se", "cr1_df", "cr1_ci95", "task_bootstrap_ci95"} {
		if !strings.Contains(string(solo["pass_rate_clustered"]), `"`+key+`"`) || !strings.Contains(string(out.Paired[0]["pass_rate_diff_clustered"]), `"`+key+`"`) {
			t.Errorf("clustered figures lack %q", key)
		}
	}
	if _, ok := out.Paired[0]["pass_rate_diff_headline"]; !ok {
		t.Error("no pass_rate_diff_headline")
	}
	var compact bytes.Buffer
	json.Compact(&compact, out.Conditions[2]["pass_rate_clustered"])
	if got := compact.String(); !strings.Contains(got, `"cr1_se":null`) || !strings.Contains(got, `"low":null`) {
		t.Errorf("nothing scored: %s", got)
	}
}

// Every format and the viewer show the intervals and say which leads.
func TestClusteredInEveryFormat(t *testing.T) {
	c := fixture(t)
	for _, format := range []string{FormatTable, FormatMarkdown, FormatHTML} {
		var buf bytes.Buffer
		if err := c.Write(&buf, format); err != nil {
			t.Fatal(err)
		}
		out := html.UnescapeString(buf.String())
		for _, want := range []string{"Intervals (95%)", "task bootstrap", "CR1 (SE, df)", "Headline: task-clustered", "[0.0%, 100.0%] (24.3 pp, 3)", "[+10.0 pp, +70.0 pp]", "a task has 3 pairs, which are not independent"} {
			if !strings.Contains(strings.ReplaceAll(out, "INTERVALS", "Intervals"), want) {
				t.Errorf("%s lacks %q", format, want)
			}
		}
	}
}

// troupe view's index shows the same intervals, from the same template.
func TestClusteredInTheViewer(t *testing.T) {
	srv := httptest.NewServer(&Viewer{Dir: "testdata/jobs"})
	t.Cleanup(srv.Close)
	code, index, _ := get(t, srv, "/?baseline=solo-mock")
	index = html.UnescapeString(index)
	for _, want := range []string{"Intervals (95%)", "Headline: task-clustered", "[+10.0 pp, +70.0 pp]", "CR1 (SE, df)", "a task has 3 pairs"} {
		if code != 200 || !strings.Contains(index, want) {
			t.Errorf("the viewer's index (%d) lacks %q", code, want)
		}
	}
}

// A sequential job's interval leads its difference, and says so, in
// every format; the fixed-sample ones stay beside it.
func TestSequentialHeadline(t *testing.T) {
	c := fixture(t)
	test, err := decide.NewTest(decide.Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 3})
	if err != nil {
		t.Fatal(err)
	}
	for r, p := range []decide.Pairs{{Up: 2, Same: 2}, {Up: 1, Same: 2}, {Up: 1, Same: 2}} {
		if _, err := test.Add(r+1, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetSequential("nobody", test); err == nil {
		t.Error("an unknown condition is accepted")
	}
	if err := c.SetSequential("team-mock", test); err != nil {
		t.Fatal(err)
	}
	p := c.Paired[0]
	if p.DiffHeadline.Interval != IntervalAnytime || p.DiffHeadline.CI.Low != test.Decision().Interval.Low || p.DiffCI.Low == p.DiffHeadline.CI.Low {
		t.Errorf("%+v", p.DiffHeadline)
	}
	for _, format := range Formats {
		var buf bytes.Buffer
		if err := c.Write(&buf, format); err != nil {
			t.Fatal(err)
		}
		out := html.UnescapeString(buf.String())
		for _, want := range []string{"anytime", "a sequential job, which looked after each of its 3 rounds", "undecided at its maximum", "Waudby-Smith"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q", format, want)
			}
		}
	}
}
