package trial

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/trial/outcome"
)

// TestComposeSidecar: a task's compose sidecar, built from its own
// Dockerfile, is healthy before the trial container starts; the agents
// and the verifier reach it by name; it goes with the trial.
func TestComposeSidecar(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/compose.yaml", "testdata/tasks/compose")
	if res.Outcome != outcome.Passed {
		out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
		t.Fatalf("%s / %s %+v:\n%s", res.Outcome, res.CompletionReason, res.ExceptionInfo, out)
	}
	stdout, _ := os.ReadFile(filepath.Join(dir, "agents", "solo-1", "stdout.log"))
	if log, _ := os.ReadFile(filepath.Join(dir, "trial.log")); !strings.Contains(string(log), "agents=no-network") {
		t.Errorf("trial.log does not say the agents had no network:\n%s\n%s", log, stdout)
	}
	left, err := testRT.List(t.Context(), map[string]string{runtime.LabelJob: env.JobID})
	if err != nil || len(left) != 0 {
		t.Errorf("left behind: %v %v", left, err)
	}
}

// TestNoAgentCodeRunsInASidecarAfterTheSweep: an agent has a compose
// sidecar start a loop that ignores TERM, in a session of its own. The
// loop is dead before the verifier looks (it counts the loop's ticks twice,
// 2 s apart), the result lists what the sidecar's sweep killed, and the
// sidecar ran with the task's limits, tightened by its own pids_limit.
func TestNoAgentCodeRunsInASidecarAfterTheSweep(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/attack-sidecar-loop.yaml", "testdata/tasks/compose-loop")
	out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
	if res.Outcome != outcome.Passed || strings.Contains(string(out), "LOOP ALIVE") {
		t.Fatalf("outcome %s (%+v): the agent's loop ran on in the sidecar during the verifier:\n%s", res.Outcome, res.ExceptionInfo, out)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "result.json"))
	var rec struct {
		ServiceSweeps []struct {
			Service   string `json:"service"`
			Signalled []struct {
				Cmd  string `json:"cmd"`
				Kill bool   `json:"killed"`
			} `json:"signalled"`
			Survivors []any `json:"survivors"`
		} `json:"service_sweeps"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.ServiceSweeps) != 1 || rec.ServiceSweeps[0].Service != "runner" {
		t.Fatalf("service_sweeps %+v, want one for runner", rec.ServiceSweeps)
	}
	sw := rec.ServiceSweeps[0]
	loop := slices.ContainsFunc(sw.Signalled, func(p struct {
		Cmd  string `json:"cmd"`
		Kill bool   `json:"killed"`
	}) bool {
		return strings.Contains(p.Cmd, "while :") && p.Kill
	})
	httpd := slices.ContainsFunc(sw.Signalled, func(p struct {
		Cmd  string `json:"cmd"`
		Kill bool   `json:"killed"`
	}) bool {
		return strings.Contains(p.Cmd, "httpd")
	})
	if !loop || httpd || len(sw.Survivors) != 0 {
		t.Errorf("runner's sweep %+v: want the loop killed (it ignores TERM), httpd spared, no survivor", sw)
	}
	// The limits, as the runner's own cgroup says them: pids_limit 64 (the
	// service's, tighter than the task's), memory 256 MB and one CPU (the task's).
	for _, want := range []string{"pids.max=64", "memory.max=268435456", "cpu.quota=100000"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the runner's limits: want %s in\n%s", want, out)
		}
	}
}
