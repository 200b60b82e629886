package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/manifest"
)

// choiceScenario is a solo agent that writes hello.txt right in a share
// of trials set by weights (a choice seeded by the trial's name), and
// declares DONE: either way.
func choiceScenario(right, wrong string) string {
	return `scripts:
  solo:
    - choose:
        - weight: ` + right + `
          steps:
            - tool_calls: [{name: shell, arguments: {command: "printf 'Hello, world!\\n' > /app/hello.txt"}}]
        - weight: ` + wrong + `
          steps:
            - tool_calls: [{name: shell, arguments: {command: "echo wrong > /app/hello.txt"}}]
    - tool_calls: [{name: send_message, arguments: {content: "DONE: wrote /app/hello.txt", mentions: [user]}}]
    - reply: done
`
}

// TestRunUntilDecided: two rosters whose mock models pass 90% and 20% of
// the time, run in rounds on three tasks: the job stops early with the
// right decision, records it, resumes without running or looking again,
// and troupe compare shows the anytime-valid interval.
func TestRunUntilDecided(t *testing.T) {
	solo := sum(mustRead(t, repoPath(t, "personas/library/solo.md")))
	hello := repoPath(t, "examples/tasks/hello-world")
	dir := isolate(t)
	write(t, "good.yaml", choiceScenario("9", "1"))
	write(t, "bad.yaml", choiceScenario("2", "8"))
	write(t, "troupe.yaml", "endpoints:\n  mock/good: {api: mock, scenario: good.yaml}\n  mock/bad: {api: mock, scenario: bad.yaml}\n")
	for _, name := range []string{"good", "bad"} {
		m := strings.Replace(manifestDoc(`"troupe:solo"`, solo, "mock/"+name), "condition: t", "condition: "+name, 1)
		write(t, filepath.Join("rosters", name+".yaml"), m)
	}
	for _, name := range []string{"hello-a", "hello-b", "hello-c"} {
		os.MkdirAll(filepath.Join(dir, "tasks"), 0o755)
		if out, err := exec.Command("cp", "-r", hello, filepath.Join(dir, "tasks", name)).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	args := []string{"run", "rosters/bad.yaml", "rosters/good.yaml", "--tasks", "tasks", "--until-decided", "--delta", "0.3", "--max-attempts", "10", "--concurrency", "3", "--out", "job"}
	code, out, errOut := troupe(t, args...)
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	var res struct {
		Sequential struct {
			Baseline   string `json:"baseline"`
			Rounds     int    `json:"rounds"`
			Conditions map[string]struct {
				Decision struct {
					Verdict  string `json:"verdict"`
					Round    int    `json:"round"`
					Interval struct{ Low, High float64 }
				} `json:"decision"`
			} `json:"conditions"`
			Run    int `json:"n_trials_run"`
			NotRun int `json:"n_trials_not_run"`
		} `json:"sequential"`
	}
	readJSON(t, filepath.Join(dir, "job", "result.json"), &res)
	s := res.Sequential
	d := s.Conditions["good"].Decision
	if s.Baseline != "bad" || d.Verdict != "better" || d.Round < 1 || d.Round >= 10 || d.Interval.Low <= 0 || s.NotRun == 0 || s.Run != 2*3*d.Round {
		t.Fatalf("%+v\n%s%s", s, out, errOut)
	}
	if !strings.Contains(out, "good                 better at round") {
		t.Errorf("the summary does not say the decision:\n%s", out)
	}
	trials, _ := filepath.Glob(filepath.Join(dir, "job", "*__*__*"))
	if len(trials) != s.Run {
		t.Errorf("%d trial folders for %d trials run", len(trials), s.Run)
	}

	// The same command again: nothing runs, nothing is looked at again.
	before, err := os.ReadFile(filepath.Join(dir, "job", "sequential.json"))
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := troupe(t, args...); code != exitOK {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "job", "sequential.json"))
	var b, a struct{ Rounds int }
	json.Unmarshal(before, &b)
	json.Unmarshal(after, &a)
	if again, _ := filepath.Glob(filepath.Join(dir, "job", "*__*__*")); len(again) != len(trials) || a.Rounds != b.Rounds {
		t.Errorf("the resumed job ran %d trials more, looked at %d rounds (was %d)", len(again)-len(trials), a.Rounds, b.Rounds)
	}
	// Other settings on the same folder are refused.
	args[7] = "0.2"
	if code, _, errOut := troupe(t, args...); code != exitFailed || !strings.Contains(errOut, "goes on with the settings it began with") {
		t.Errorf("changed --delta: exit %d: %s", code, errOut)
	}

	code, out, errOut = troupe(t, "compare", "job", "--baseline", "bad", "--format", "json")
	if code != exitOK {
		t.Fatalf("compare: exit %d\n%s%s", code, out, errOut)
	}
	var cmp struct {
		Paired []struct {
			Condition  string `json:"condition"`
			Sequential *struct {
				Decision struct{ Verdict string } `json:"decision"`
			} `json:"sequential"`
			Headline struct {
				Interval string `json:"interval"`
			} `json:"pass_rate_diff_headline"`
		} `json:"paired"`
	}
	if err := json.Unmarshal([]byte(out), &cmp); err != nil {
		t.Fatal(err)
	}
	if len(cmp.Paired) != 1 || cmp.Paired[0].Sequential == nil || cmp.Paired[0].Sequential.Decision.Verdict != "better" || !strings.Contains(cmp.Paired[0].Headline.Interval, "anytime") {
		t.Errorf("compare: %+v\n%s", cmp.Paired, out)
	}
	if code, out, _ := troupe(t, "compare", "job", "--baseline", "bad"); code != exitOK || !strings.Contains(out, "anytime") {
		t.Errorf("the table does not show the anytime-valid interval:\n%s", out)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestSequentialFromAPilot: --pilot sizes the test's bets and its fixed
// design from the pilot's paired variance, smaller than the most a pair's
// variance can be, which is used without one.
func TestSequentialFromAPilot(t *testing.T) {
	pilot := writePilot(t, pilotScenario())
	conds := []job.Condition{
		{Team: &manifest.Team{Manifest: &manifest.Manifest{Condition: "solo"}}},
		{Team: &manifest.Team{Manifest: &manifest.Manifest{Condition: "team"}}},
	}
	opts := runOptions{delta: 0.15, alpha: 0.05, power: 0.8}
	blind, _, err := sequential(io.Discard, conds, 24, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.pilot = pilot
	sized, rounds, err := sequential(io.Discard, conds, 24, opts)
	if err != nil {
		t.Fatal(err)
	}
	if sized.Params.PriorVariance >= blind.Params.PriorVariance || sized.Params.FixedRounds >= blind.Params.FixedRounds || rounds != 2*sized.Params.FixedRounds || sized.Baseline != "solo" {
		t.Errorf("with the pilot %+v (%d rounds); without %+v", sized.Params, rounds, blind.Params)
	}
	opts.baseline = "team"
	if _, _, err := sequential(io.Discard, conds, 24, opts); err != nil {
		t.Errorf("the pilot against team: %v", err)
	}
	opts.baseline, opts.pilot = "", filepath.Join(t.TempDir(), "none")
	if _, _, err := sequential(io.Discard, conds, 24, opts); err == nil || !strings.Contains(err.Error(), "--pilot") {
		t.Errorf("a missing pilot: %v", err)
	}
}
