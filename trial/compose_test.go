package trial

import (
	"os"
	"path/filepath"
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
