package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/internal/syncbuf"
	troupejob "github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/docker"
	"github.com/troupebench/troupe/runtime/staticbin"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// These run against the real Docker Engine, like troupe would.

func TestDoctor(t *testing.T) {
	isolate(t)
	code, out, _ := troupe(t, "doctor")
	for _, check := range []string{"engine: Docker ", "base image: busybox:latest is present", "no-network container: one started", "disk:", "troupe binary:", "leftovers:"} {
		if !strings.Contains(out, check) {
			t.Errorf("doctor output lacks %q:\n%s", check, out)
		}
	}
	if code != exitOK && !strings.Contains(out, "FAIL  leftovers") && !strings.Contains(out, "FAIL  disk") {
		t.Errorf("doctor failed (exit %d):\n%s", code, out)
	}
}

// TestDoctorWithoutAnEngine: the failure names the check once and says
// what to do.
func TestDoctorWithoutAnEngine(t *testing.T) {
	isolate(t)
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	code, out, _ := troupe(t, "doctor")
	if code != exitFailed || !strings.Contains(out, "FAIL  engine: docker: the engine at") || !strings.Contains(out, "fix: start the Docker daemon") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if strings.Contains(out, "docker: docker:") {
		t.Errorf("the check's name is said twice:\n%s", out)
	}
}

// TestInstalledBinaryRunsTrials builds troupe as a user who skips the
// README's CGO_ENABLED=0 would, with a C compiler at hand (cgo on: a
// dynamic binary no task image can run), and runs a real trial with it
// from another folder. The build adds -race, dynamic for the same reason
// (cgo), so that it reuses the compiled packages of the tests' own -race
// build instead of compiling client-go and the rest once more.
func TestInstalledBinaryRunsTrials(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no C compiler: go build makes a static troupe here, the case this test is about cannot happen")
	}
	root, _ := filepath.Abs("../..")
	dir := isolate(t)
	bin := filepath.Join(t.TempDir(), "troupe")
	build := exec.Command("go", "build", "-race", "-o", bin, "./cmd/troupe")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if _, err := staticbin.Load(bin); !errors.Is(err, staticbin.ErrNotStatic) {
		t.Fatalf("go build with cgo made a static binary (%v): this test proves nothing", err)
	}
	doctor := exec.Command(bin, "doctor")
	out, _ := doctor.CombinedOutput()
	if !strings.Contains(string(out), "ok    troupe binary: this build needs a dynamic loader (cgo); trials use a static copy built from "+root) {
		t.Errorf("doctor:\n%s", out)
	}
	job := filepath.Join(dir, "job")
	cmd := exec.Command(bin, "run", filepath.Join(root, "examples/manifests/solo.yaml"), "--tasks", filepath.Join(root, "examples/tasks/hello-world"), "--out", job)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("troupe run with the installed binary: %v\n%s", err, out)
	}
	var res troupejob.Result
	readJSON(t, filepath.Join(job, "result.json"), &res)
	if c := res.Conditions["hello-solo-mock"]; c == nil || c.Passed != 1 {
		t.Errorf("the trial did not pass: %+v", res.Conditions)
	}
}

// TestRunExitsThreeWhenTrialsWereNotMeasured: a job whose trials the
// harness failed (an image that cannot build) must not look like a job that
// measured a roster; a script tells the two apart by the exit status.
func TestRunExitsThreeWhenTrialsWereNotMeasured(t *testing.T) {
	root, _ := filepath.Abs("../..")
	dir := isolate(t)
	code, stdout, stderr := troupe(t, "run", filepath.Join(root, "examples/manifests/solo.yaml"),
		"--tasks", filepath.Join(root, "trial/testdata/tasks/broken-dockerfile"), "--retries", "0", "--out", filepath.Join(dir, "job"))
	if code != exitUnmeasured || !strings.Contains(stderr, "1 of 1 trials could not be measured") || !strings.Contains(stderr, "run the same command again to retry them") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "unscored_infra") && !strings.Contains(stdout, "INFRA") {
		t.Errorf("the summary does not show the infra failure:\n%s", stdout)
	}
}

// TestRunAndCompareAgree runs a real job whose trials pass, fail and end in
// verifier errors, then reads it with troupe compare: the pass rates of the
// end-of-run table, of the job's result.json and of the comparison are the
// same numbers (verifier_error is scored and not passed everywhere).
func TestRunAndCompareAgree(t *testing.T) {
	root, _ := filepath.Abs("../..")
	dir := isolate(t)
	job := filepath.Join(dir, "job")
	// The wrong scenario is the trial tests': an endpoint points at it.
	config := filepath.Join(dir, "troupe.yaml")
	write(t, config, "endpoints:\n  mock/wrong:\n    api: mock\n    scenario: "+filepath.Join(root, "trial/testdata/scenarios/wrong.yaml")+"\n")
	code, stdout, stderr := troupe(t, "run", "--config", config, filepath.Join(root, "examples/manifests/solo.yaml"), filepath.Join(root, "trial/testdata/manifests/wrong.yaml"),
		"--tasks", filepath.Join(root, "examples/tasks/hello-world"), "--tasks", filepath.Join(root, "trial/testdata/tasks/verifier-hangs"), "--out", job)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var res troupejob.Result
	readJSON(t, filepath.Join(job, "result.json"), &res)
	code, out, errOut := troupe(t, "compare", job, "--format", "json")
	if code != exitOK {
		t.Fatalf("compare: exit %d\n%s", code, errOut)
	}
	var cmp struct {
		Conditions []struct {
			Name     string   `json:"condition"`
			Scored   int      `json:"n_scored"`
			Passed   int      `json:"n_passed"`
			PassRate *float64 `json:"pass_rate"`
		} `json:"conditions"`
	}
	if err := json.Unmarshal([]byte(out), &cmp); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string]float64{"hello-solo-mock": 0.5, "test-wrong": 0} // solo: passed + verifier_error
	for _, c := range cmp.Conditions {
		j := res.Conditions[c.Name]
		if j == nil || c.PassRate == nil || j.PassRate == nil {
			t.Fatalf("%s: compare %+v, run %+v", c.Name, c, j)
		}
		if *c.PassRate != want[c.Name] || *j.PassRate != *c.PassRate || j.Scored != c.Scored || c.Scored != 2 || j.Passed != c.Passed {
			t.Errorf("%s: compare says %d/%d = %v, troupe run says %d/%d = %v; want %v of 2", c.Name, c.Passed, c.Scored, *c.PassRate, j.Passed, j.Scored, *j.PassRate, want[c.Name])
		}
	}
	if !strings.Contains(stdout, "50% of 2") {
		t.Errorf("the end-of-run table does not show 50%% of 2 for hello-solo-mock:\n%s", stdout)
	}
}

func TestCleanDryRun(t *testing.T) {
	isolate(t)
	// Only a dry run here: other test packages run at the same time, and a
	// real clean could reap a container one of them is about to check.
	code, out, errOut := troupe(t, "clean", "--dry-run")
	if code != exitOK || (out != "nothing to clean\n" && !strings.HasPrefix(out, "would remove ")) {
		t.Errorf("exit %d: %q %q", code, out, errOut)
	}
}

func TestHiddenInsideCommands(t *testing.T) {
	isolate(t)
	_, out, _ := troupe(t, "--help")
	for _, hidden := range []string{"init", "sweep", "tunnel", "call", "mcp"} {
		if strings.Contains(out, "\n  "+hidden+" ") {
			t.Errorf("%s is listed in --help; it runs only inside containers", hidden)
		}
	}
	if code, _, errOut := troupe(t, "tunnel", "--listen", "no-equals-sign"); code != exitUsage || !strings.Contains(errOut, "ADDR=NAME") {
		t.Errorf("bad --listen: %d %s", code, errOut)
	}
}

// TestRunInterruptAndResume runs the real binary: SIGINT in the middle of a
// job with concurrency 4 leaves no container; the same command then
// finishes the job without rerunning what finished.
func TestRunInterruptAndResume(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "troupe")
	if err := staticbin.Build(t.Context(), "../..", bin); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sigint-job")
	// The slow scenario is the trial tests': an endpoint in a config file
	// points at it.
	scenario, _ := filepath.Abs("../../trial/testdata/scenarios/slow.yaml")
	config := filepath.Join(t.TempDir(), "troupe.yaml")
	write(t, config, "endpoints:\n  mock/slow:\n    api: mock\n    scenario: "+scenario+"\n")
	args := []string{"run", "--config", config, "trial/testdata/manifests/slow.yaml", "--tasks", "examples/tasks/hello-world", "-k", "8", "-n", "4", "--out", out, "--json"}
	cmd := exec.Command(bin, args...)
	cmd.Dir = "../.."
	var stdout, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Interrupt once two trials have finished.
	deadline := time.After(90 * time.Second)
	for strings.Count(stdout.String(), `"type":"trial_finished"`) < 2 {
		select {
		case err := <-exited:
			t.Fatalf("troupe run ended before it was interrupted: %v\n%s\n%s", err, stdout.String(), stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("no trial finished:\n%s\n%s", stdout.String(), stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cmd.Process.Signal(os.Interrupt)
	err := <-exited
	exitErr, ok := errors.AsType[*exec.ExitError](err)
	if !ok || exitErr.ExitCode() != exitFailed || !strings.Contains(stderr.String(), "run the same command to finish the job") {
		t.Fatalf("interrupted run: %v\n%s", err, stderr.String())
	}
	rt := docker.New("test", nil)
	if err := rt.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	t.Cleanup(func() {
		if b, err := staticbin.Load(bin); err == nil {
			if err := rt.RemoveBinaryVolume(context.Background(), b); err != nil {
				t.Errorf("remove the binary volume: %v", err)
			}
		}
	})
	left, _ := rt.List(t.Context(), map[string]string{runtime.LabelJob: ""})
	for _, r := range left {
		if strings.HasPrefix(r.Labels[runtime.LabelJob], "sigint-job-") {
			t.Errorf("left behind after SIGINT: %s", r)
			rt.Remove(t.Context(), r)
			if logs, _ := filepath.Glob(filepath.Join(out, "*", "trial.log")); len(logs) > 0 {
				for _, l := range logs {
					data, _ := os.ReadFile(l)
					t.Logf("%s:\n%s", l, data)
				}
			}
			t.Logf("stderr:\n%s", stderr.String())
		}
	}
	var first troupejob.Result
	readJSON(t, filepath.Join(out, "result.json"), &first)
	kept := map[string]string{}
	for name, o := range first.Trials {
		if o == outcome.Passed {
			var r trialdir.TrialResult
			readJSON(t, filepath.Join(out, name, "result.json"), &r)
			kept[name] = r.ID
		}
	}
	if len(kept) < 2 || len(kept) == 8 {
		t.Fatalf("after SIGINT %d trials passed; want some, not all: %+v", len(kept), first.Stats)
	}

	rerun := exec.Command(bin, args[:len(args)-1]...)
	rerun.Dir = "../.."
	output, err := rerun.CombinedOutput()
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, output)
	}
	if !strings.Contains(string(output), fmt.Sprintf("(%d kept from an earlier run)", len(kept))) || !strings.Contains(string(output), "test-slow  8       8") {
		t.Errorf("rerun output:\n%s", output)
	}
	for name, id := range kept {
		var r trialdir.TrialResult
		readJSON(t, filepath.Join(out, name, "result.json"), &r)
		if r.ID != id {
			t.Errorf("%s was run again", name)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// TestTasksCheck runs the oracle on a good and a broken task: the report
// names the broken one and why, and the exit status says a task is broken.
// troupe run --oracle needs no manifest; a task without a solution is
// refused before anything starts.
func TestTasksCheck(t *testing.T) {
	root, _ := filepath.Abs("../..")
	dir := isolate(t)
	code, stdout, stderr := troupe(t, "tasks", "check", filepath.Join(root, "examples/tasks"), filepath.Join(root, "trial/testdata/tasks/oracle-wrong"), "--out", filepath.Join(dir, "check"))
	for _, want := range []string{"ok      hello-world\n", "broken  oracle-wrong\n", "the solution scored 0; tests/test.sh said: answer: 41",
		"2 tasks: 1 pass with their own solution, 1 broken"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s\n%s", want, stdout, stderr)
		}
	}
	if code != exitFailed {
		t.Errorf("exit %d with a broken task", code)
	}
	// Every example task passes with its own solution (each builds offline,
	// from busybox): one report per task folder, each ok with reward 1.
	examples, err := task.Dirs([]string{filepath.Join(root, "examples/tasks")})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = troupe(t, "tasks", "check", filepath.Join(root, "examples/tasks"), "--json", "--out", filepath.Join(dir, "check"))
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != exitOK || len(lines) != len(examples) {
		t.Errorf("exit %d, %d reports for %d example tasks: %s", code, len(lines), len(examples), stdout)
	}
	for _, line := range lines {
		var r checkReport
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Status != "ok" || r.Reward == nil || *r.Reward != 1 {
			t.Errorf("%+v %v: %s", r, err, line)
		}
	}

	code, stdout, stderr = troupe(t, "run", "--oracle", "--tasks", filepath.Join(root, "examples/tasks/hello-world"), "--out", filepath.Join(dir, "oracle"))
	if code != exitOK || !strings.Contains(stdout, "oracle") {
		t.Errorf("run --oracle: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, _, stderr = troupe(t, "tasks", "check", filepath.Join(root, "trial/testdata/tasks/allowlist"), "--out", filepath.Join(dir, "nosolution"))
	if code != exitFailed || !strings.Contains(stderr, "has no solution/solve.sh: the oracle has nothing to run there") {
		t.Errorf("a task without a solution: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "nosolution")); err == nil {
		t.Error("a job folder was made for a refused check")
	}
	code, _, stderr = troupe(t, "run", "--tasks", filepath.Join(root, "examples/tasks"))
	if code != exitUsage || !strings.Contains(stderr, "needs at least one manifest file, or --oracle") {
		t.Errorf("run without a manifest: exit %d: %s", code, stderr)
	}
}

// TestScenarioFromTrial: a recorded team trial becomes a scenario; the
// team played against it offline (its endpoint configured as that mock)
// says the same things and passes again.
func TestScenarioFromTrial(t *testing.T) {
	root, _ := filepath.Abs("../..")
	dir := isolate(t)
	first := filepath.Join(dir, "first")
	code, out, errOut := troupe(t, "run", filepath.Join(root, "examples/manifests/team.yaml"), "--tasks", filepath.Join(root, "examples/tasks/hello-world"), "--out", first)
	if code != exitOK {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	trialDir := filepath.Join(first, "hello-world__hello-team-mock__1")
	code, scenario, errOut := troupe(t, "scenario", "from-trial", trialDir)
	if code != exitOK || !strings.Contains(scenario, "lead-1") {
		t.Fatalf("from-trial: exit %d\n%s%s", code, scenario, errOut)
	}
	write(t, filepath.Join(dir, "from.yaml"), scenario)
	config := filepath.Join(dir, "troupe.yaml")
	write(t, config, "endpoints:\n  mock/hello-team: {api: mock, scenario: from.yaml}\n")
	second := filepath.Join(dir, "second")
	code, out, errOut = troupe(t, "run", "--config", config, filepath.Join(root, "examples/manifests/team.yaml"), "--tasks", filepath.Join(root, "examples/tasks/hello-world"), "--out", second)
	if code != exitOK {
		t.Fatalf("played again: exit %d\n%s%s", code, out, errOut)
	}
	said := func(dir string) []string {
		data, err := os.ReadFile(filepath.Join(dir, "hello-world__hello-team-mock__1", "relay", "transcript.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
			var rec struct {
				Event struct {
					Kind    int    `json:"kind"`
					Content string `json:"content"`
				} `json:"event"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Event.Kind == 9 {
				msgs = append(msgs, rec.Event.Content)
			}
		}
		return msgs
	}
	if a, b := said(first), said(second); strings.Join(a, "\n") != strings.Join(b, "\n") || len(a) < 3 {
		t.Errorf("the channel said\n%q\nthen\n%q", a, b)
	}
}
