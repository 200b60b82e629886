package report

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The fixture: two hand-made jobs, solo and team, 4 tasks x 3 attempts
// (testdata/jobs; the pattern is in its generator's comments, and the
// numbers below follow from it by hand).
func fixture(t *testing.T) *Comparison {
	t.Helper()
	trials, err := Load("testdata/jobs")
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != 24 {
		t.Fatalf("%d trials; the superseded run and the job results must be left out", len(trials))
	}
	c, err := Compare(trials, "solo-mock")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCompareFixture(t *testing.T) {
	c := fixture(t)
	if len(c.Conditions) != 2 || c.Baseline != "solo-mock" || len(c.Tasks) != 4 {
		t.Fatalf("%+v", c)
	}
	solo, team := c.Conditions[0], c.Conditions[1]
	// solo: 12 trials, one unscored_infra: 11 scored, 4 passed.
	if solo.Trials != 12 || solo.Scored != 11 || solo.Passed != 4 || solo.UnscoredInfra != 1 || !near(solo.PassRate, 4.0/11, 1e-9) {
		t.Errorf("solo %+v", solo)
	}
	if w := Wilson(4, 11); solo.PassRateCI != w {
		t.Errorf("solo interval %v, want %v", solo.PassRateCI, w)
	}
	// team: one cancelled, one verifier_error (scored, not passed): 8 of 11.
	if team.Scored != 11 || team.Passed != 8 || team.VerifierError != 1 || team.Cancelled != 1 {
		t.Errorf("team %+v", team)
	}
	// pass@k: team has a task with 2 scored attempts, so k stops at 2.
	if _, ok := team.PassAtK[3]; ok || len(team.PassAtK) != 2 {
		t.Errorf("team pass@k %v", team.PassAtK)
	}
	// solo pass@1 is the mean over tasks of each task's pass rate:
	// (1/3 + 0 + 3/3 + 0/2) / 4.
	if want := (1.0/3 + 0 + 1 + 0) / 4; !near(solo.PassAtK[1], want, 1e-9) {
		t.Errorf("solo pass@1 %v, want %v", solo.PassAtK[1], want)
	}
	// Usage counts every trial, unscored ones too: they were paid for.
	if r := team.ByRole["implementer"]; r.Calls != 4*12 || r.InputTokens != 1000*12 {
		t.Errorf("team implementer usage %+v", r)
	}
	if !near(float64(team.CostPerSolved), sumScoredCost(t, "team-mock")/8, 1e-9) || math.IsInf(float64(solo.CostPerSolved), 0) {
		t.Errorf("cost per solved %v %v", team.CostPerSolved, solo.CostPerSolved)
	}
	// Paired: 10 (task, attempt) scored under both; team passes 4 that solo
	// fails and fails none solo passes.
	p := c.Paired[0]
	if p.Pairs != 10 || p.BothPassed != 4 || p.OnlyThis != 4 || p.OnlyBaseline != 0 || p.NeitherPass != 2 || !near(p.Diff, 0.4, 1e-9) {
		t.Errorf("paired %+v", p)
	}
	if !near(p.McNemarP, 0.125, 1e-12) || p.DiffCI.Low <= 0 || p.DiffCI.High > 1 || p.Warning != "" {
		t.Errorf("paired test %+v", p)
	}
	if c.Grid["fix-tests"]["team-mock"] != (Cell{Passed: 1, Scored: 3, Trials: 3}) || c.Grid["regex-log"]["solo-mock"] != (Cell{Passed: 0, Scored: 2, Trials: 3}) {
		t.Errorf("grid %v", c.Grid)
	}
}

func sumScoredCost(t *testing.T, cond string) float64 {
	trials, _ := Load("testdata/jobs")
	sum := 0.0
	for _, tr := range trials {
		if tr.Condition == cond && tr.Outcome.Scored() {
			sum += float64(tr.AgentResult.CostUSD)
		}
	}
	return sum
}

func TestCompareProblems(t *testing.T) {
	trials, _ := Load("testdata/jobs")
	if _, err := Compare(trials, "nobody"); err == nil || !strings.Contains(err.Error(), `no condition "nobody" among solo-mock, team-mock`) {
		t.Errorf("unknown baseline: %v", err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no trial results") {
		t.Errorf("empty folder: %v", err)
	}
	// Few pairs: a warning, not a verdict.
	var few []*Trial
	for _, tr := range trials {
		if tr.TaskName == "hello-world" {
			few = append(few, tr)
		}
	}
	c, err := Compare(few, "solo-mock")
	if err != nil || !strings.Contains(c.Paired[0].Warning, "only 3 pairs") {
		t.Errorf("few pairs: %+v %v", c.Paired, err)
	}
}

// mk makes an in-memory trial, finished at minute min of the day.
func mk(cond, hash, task string, attempt int, o outcome.Outcome, minute int) *Trial {
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	return &Trial{TrialResult: trialdir.TrialResult{TrialName: fmt.Sprintf("%s__%s__%d", task, cond, attempt), TaskName: task, Attempt: attempt,
		Condition: cond, ManifestHash: hash, Outcome: o,
		StartedAt: start, FinishedAt: start.Add(time.Duration(minute) * time.Minute)}, Dir: fmt.Sprintf("%s-%d", cond, minute)}
}

func TestPairingDuplicatesAndChangedTasks(t *testing.T) {
	// The baseline failed each of 5 tasks once; the condition was run in
	// two jobs that both passed attempt 1. Counting both would make 10
	// pairs and p=0.002; there are 5 (task, attempt), whichever side is
	// the baseline.
	var trials []*Trial
	for i := range 5 {
		task := fmt.Sprint("task-", i)
		trials = append(trials, mk("solo", "aaaa", task, 1, outcome.Failed, 1),
			mk("team", "bbbb", task, 1, outcome.Passed, 2), mk("team", "bbbb", task, 1, outcome.Passed, 3))
	}
	for _, base := range []string{"solo", "team"} {
		c, err := Compare(trials, base)
		if err != nil {
			t.Fatal(err)
		}
		p := c.Paired[0]
		if p.Pairs != 5 || !near(p.McNemarP, 0.0625, 1e-12) || !strings.Contains(p.Warning, "5 (task, attempt) were scored more than once") || !strings.Contains(p.Warning, "only 5 pairs") {
			t.Errorf("baseline %s: %+v", base, p)
		}
	}
	// The latest result of a duplicated (task, attempt) is the one paired.
	late := mk("team", "bbbb", "task-0", 1, outcome.Failed, 9)
	c, _ := Compare(append(slices.Clone(trials), late), "solo")
	if p := c.Paired[0]; p.Pairs != 5 || p.NeitherPass != 1 || p.OnlyThis != 4 {
		t.Errorf("latest result not used: %+v", p)
	}
	// A task whose files changed between the runs is not paired.
	base, redo := *trials[0], *trials[2]
	base.TaskChecksum, redo.TaskChecksum = "v1", "v2"
	changed := []*Trial{&base, &redo}
	c, _ = Compare(changed, "solo")
	if p := c.Paired[0]; p.Pairs != 0 || !strings.Contains(p.Warning, "1 (task, attempt) left unpaired: the task's files differ") {
		t.Errorf("changed task: %+v", p)
	}
}

func TestBaselineIsNameFirstThenUniqueHashPrefix(t *testing.T) {
	trials := []*Trial{mk("alpha", "be11aa", "t", 1, outcome.Passed, 1), mk("be", "0000aa", "t", 1, outcome.Passed, 1),
		mk("cafe", "be22bb", "t", 1, outcome.Passed, 1), mk("solo", "", "t", 1, outcome.Passed, 1)}
	tests := []struct{ arg, want, err string }{
		{"be", "be", ""},
		{"be11", "alpha", ""},
		{"BE22", "cafe", ""},
		{"b", "", `"b" starts the manifest hash of 2 conditions (alpha, cafe)`},
		{"so", "", `no condition "so" among alpha, be, cafe, solo`},
		{"solo", "solo", ""},
	}
	for _, tt := range tests {
		c, err := Compare(trials, tt.arg)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: error %v, want %q", tt.arg, err, tt.err)
		case tt.err == "" && (err != nil || c.Baseline != tt.want):
			t.Errorf("%q: baseline %v (%v), want %s", tt.arg, c, err, tt.want)
		}
	}
}

func TestWallTimeLeavesOutResultsWithoutTimes(t *testing.T) {
	a, b := mk("solo", "aa", "t", 1, outcome.Passed, 4), mk("solo", "aa", "t", 2, outcome.Passed, 0)
	b.FinishedAt = time.Time{} // a crashed writer's result
	c, _ := Compare([]*Trial{a, b}, "")
	if w := c.Conditions[0].WallMean; w != 4*time.Minute || c.Conditions[0].WallMedian != w {
		t.Errorf("wall mean %v, want 4m", w)
	}
}

func TestWarningsAndPassAtKAreReproducible(t *testing.T) {
	var trials []*Trial
	for i := range 40 {
		for a := range 7 {
			out := outcome.Failed
			if (i*7+a)%3 != 0 {
				out = outcome.Passed
			}
			trials = append(trials, mk("c", "h", fmt.Sprint("task-", i), a+1, out, 1))
		}
	}
	for _, n := range []string{"w", "x", "y", "z"} {
		trials = append(trials, mk(n, n+"1", "t", 1, outcome.Passed, 1), mk(n, n+"2", "t", 1, outcome.Passed, 1))
	}
	first, _ := Compare(trials, "c")
	for range 20 {
		again, _ := Compare(trials, "c")
		if !reflect.DeepEqual(first.Conditions[0].PassAtK, again.Conditions[0].PassAtK) || !slices.Equal(first.Warnings, again.Warnings) {
			t.Fatalf("two runs differ: %v %v / %v %v", first.Conditions[0].PassAtK, first.Warnings, again.Conditions[0].PassAtK, again.Warnings)
		}
	}
	if !slices.IsSorted(first.Warnings) || len(first.Warnings) != 4 {
		t.Errorf("warnings %v", first.Warnings)
	}
}

// Golden outputs: run with -update after a deliberate change.
func TestGolden(t *testing.T) {
	c := fixture(t)
	for _, f := range []string{FormatTable, FormatMarkdown, FormatJSON} {
		var buf bytes.Buffer
		if err := c.Write(&buf, f); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "golden", "compare."+f)
		if *update {
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, buf.Bytes(), 0o644)
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./report -update to write it)", err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s output differs from %s (go test ./report -update rewrites it after a deliberate change):\n%s", f, path, buf.String())
		}
	}
}

func TestHTMLReport(t *testing.T) {
	c := fixture(t)
	var buf bytes.Buffer
	if err := c.Write(&buf, FormatHTML); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{"<!DOCTYPE html>", "<svg", `aria-label="pass rate with 95% intervals"`, `class="point pareto"`, `class="front"`, "csv-to-json", "team-mock", "72.7%", "McNemar"} {
		if !strings.Contains(html, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	// Self-contained: no external URL, no script, nothing fetched.
	if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|<script|<link|@import|src=`).FindString(html); m != "" && !strings.HasPrefix(m, "//www.w3.org") {
		t.Errorf("the report refers to something outside itself: %q", m)
	}
	if strings.Count(html, "<svg") != 3 || strings.Count(html, "</svg>") != 3 {
		t.Errorf("want 3 charts")
	}
	// The Pareto front: team is better and dearer, solo cheaper: both on it.
	if strings.Count(html, `class="point pareto"`) != 2 {
		t.Errorf("pareto points: %d", strings.Count(html, `class="point pareto"`))
	}
}

// FuzzResult: any result.json is a trial, skipped, or an error; and
// whatever loads compares and renders without panicking.
func FuzzResult(f *testing.F) {
	for _, s := range []string{
		`{"trial_name":"a__b__1","task_name":"a","attempt":1,"condition":"b","manifest_sha256":"x","outcome":"passed","reward":1}`,
		`{"trial_name":"t","outcome":"failed","task_name":"t","condition":"c","agents":[{"role":"lead","usage":{"calls":1,"cost_usd":1e308}}]}`,
		`{"id":"job","n_total_trials":3}`, `[]`, `{"trial_name":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "result.json")
		os.WriteFile(p, data, 0o644)
		tr, err := readTrial(p)
		if err != nil || tr == nil {
			return
		}
		c, err := Compare([]*Trial{tr, tr}, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, format := range Formats {
			if err := c.Write(io.Discard, format); err != nil {
				t.Fatalf("%s: %v", format, err)
			}
		}
	})
}

// TestUntrustedVerdictsAreWarned: trials whose system files changed before
// the verifier are counted in a warning per condition; redone runs are not.
func TestUntrustedVerdictsAreWarned(t *testing.T) {
	var trials []*Trial
	for i := range 4 {
		tr := mk("c", "h", fmt.Sprint("task-", i), 1, outcome.Passed, 1)
		tr.VerdictUntrusted = i < 2
		trials = append(trials, tr, mk("b", "hb", fmt.Sprint("task-", i), 1, outcome.Passed, 1))
	}
	redone := mk("c", "h", "task-3", 1, outcome.Passed, 2)
	redone.Redone, redone.VerdictUntrusted = true, true
	c, err := Compare(append(trials, redone), "b")
	if err != nil {
		t.Fatal(err)
	}
	want := `condition "c" has 2 trials whose verdict is marked untrusted`
	if len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], want) {
		t.Errorf("warnings %q, want one starting %q", c.Warnings, want)
	}
}

// TestAgentCodeDuringVerifierIsWarned: trials whose sweep kept the agents'
// detached processes into the verifier are counted in a warning.
func TestAgentCodeDuringVerifierIsWarned(t *testing.T) {
	var trials []*Trial
	for i := range 3 {
		tr := mk("c", "h", fmt.Sprint("task-", i), 1, outcome.Passed, 1)
		tr.AgentCodeDuringVerifier = i == 0
		trials = append(trials, tr, mk("b", "hb", fmt.Sprint("task-", i), 1, outcome.Passed, 1))
	}
	c, err := Compare(trials, "b")
	if err != nil {
		t.Fatal(err)
	}
	want := `condition "c" has 1 trials during whose verifier agent code ran`
	if len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], want) {
		t.Errorf("warnings %q, want one starting %q", c.Warnings, want)
	}
}
