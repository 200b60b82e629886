package report

import (
	"bytes"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	if solo.Trials != 12 || solo.Scored != 11 || solo.Passed != 4 || solo.Infra != 1 || !near(solo.PassRate, 4.0/11, 1e-9) {
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
	if !near(team.CostPerSolved, sumScoredCost(t, "team-mock")/8, 1e-9) || math.IsInf(solo.CostPerSolved, 0) {
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
		if tr.Condition == cond && scored(tr) {
			sum += tr.AgentResult.CostUSD
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
		if tr.Task == "hello-world" {
			few = append(few, tr)
		}
	}
	c, err := Compare(few, "solo-mock")
	if err != nil || !strings.Contains(c.Paired[0].Warning, "only 3 pairs") {
		t.Errorf("few pairs: %+v %v", c.Paired, err)
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
