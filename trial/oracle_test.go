package trial

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// runOracle runs the oracle on a task, as troupe run --oracle does.
func runOracle(t *testing.T, env *Env, taskDir string) (*trialdir.TrialResult, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "trial")
	res, err := Run(t.Context(), env, Spec{Name: "t__oracle__1", Dir: dir, Team: OracleTeam(), ManifestPath: OracleManifestPath, Task: loadTask(t, taskDir), Attempt: 1, Oracle: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, dir)
		}
	})
	noSecrets(t, dir)
	checkHarborFiles(t, dir)
	return res, dir
}

// TestOracle: the oracle runs solution/solve.sh as the task's agent user,
// in its working folder, with its env and [solution] env, and the verifier
// judges it; a broken solution fails, and what it left running is swept.
func TestOracle(t *testing.T) {
	t.Setenv("TROUPE_TEST_HOSTVAL", "from-the-host")
	env := testEnv(t)
	for _, c := range []struct {
		task string
		want outcome.Outcome
		user string
		out  string
	}{
		{helloWorld, outcome.Passed, "oracle:root", ""},
		{"testdata/tasks/harbor-keys", outcome.Passed, "oracle:agent", "solver: the oracle"},
		{"testdata/tasks/oracle-wrong", outcome.Failed, "oracle:root", "solved, wrongly"},
	} {
		res, dir := runOracle(t, env, c.task)
		if res.Outcome != c.want || res.CompletionReason != AgentsExited || res.AgentUser != c.user || res.Condition != "oracle" {
			out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
			t.Errorf("%s: %s / %s as %s (%s) %+v:\n%s", c.task, res.Outcome, res.CompletionReason, res.AgentUser, res.Condition, res.ExceptionInfo, out)
			continue
		}
		if out, _ := os.ReadFile(filepath.Join(dir, "agents", "oracle", "stdout.log")); !strings.Contains(string(out), c.out) {
			t.Errorf("%s: the oracle's output %q does not say %q", c.task, out, c.out)
		}
		if len(res.Agents) != 1 || res.Agents[0].ExitCode == nil || *res.Agents[0].ExitCode != 0 || res.AgentResult.NCalls != 0 {
			t.Errorf("%s: agents %+v, calls %d", c.task, res.Agents, res.AgentResult.NCalls)
		}
	}
	res, _ := runOracle(t, env, "testdata/tasks/oracle-wrong")
	swept := false
	for _, p := range res.Sweep.Signalled {
		swept = swept || strings.Contains(p.Cmd, "sleep 600")
	}
	if !swept {
		t.Errorf("the solution's background process was not swept: %+v", res.Sweep)
	}
}

// TestOracleNeedsASolution: a task without solution/solve.sh is not a
// harness failure to retry but a task the oracle cannot run.
func TestOracleNeedsASolution(t *testing.T) {
	env := testEnv(t)
	res, _ := runOracle(t, env, "testdata/tasks/allowlist")
	if res.Outcome != outcome.UnscoredInfra || res.ExceptionInfo == nil || !strings.Contains(res.ExceptionInfo.ExceptionMessage, "has no solution/solve.sh") {
		t.Fatalf("%s %+v", res.Outcome, res.ExceptionInfo)
	}
}
