package trial

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/trial/outcome"
)

// TestTaskMCPServersAndSkillsReachTheAgent: a task's stdio MCP server (a
// program of its image) becomes the reference agent's facts__lookup tool,
// and the task's skills folder is copied, as the agent's own, to where its
// stack says it reads skills. The verifier sees the server's record of the
// call and the skill the agent copied from its HOME.
func TestTaskMCPServersAndSkillsReachTheAgent(t *testing.T) {
	env := testEnv(t)
	dir := filepath.Join(t.TempDir(), "trial")
	skilled := &stack.Stack{Name: "skilled", Source: "tasktools_test.go", Command: []string{runtime.BinaryPath, "agent"}, Skills: "~/.skills"}
	res, err := Run(t.Context(), env, Spec{Name: "t__tools__1", Dir: dir, Team: team(t, "testdata/manifests/task-tools.yaml"), ManifestPath: "task-tools.yaml",
		Task: loadTask(t, "testdata/tasks/task-tools"), Attempt: 1, Stacks: stack.Set{"skilled": skilled}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, dir)
		}
	})
	if res.Outcome != outcome.Passed || res.CompletionReason != DeclaredDone {
		t.Fatalf("%s / %s %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo)
	}
	stderr, _ := os.ReadFile(filepath.Join(dir, "agents", "solo-1", "stderr.log"))
	if !strings.Contains(string(stderr), `"msg":"task MCP server","agent":"solo-1","mcp_server":"facts","tools":1`) {
		t.Errorf("the agent did not list the task's server's tool:\n%s", stderr)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "trial.log"))
	if !strings.Contains(string(log), "task skills copied") {
		t.Errorf("trial.log does not say the skills were copied:\n%s", log)
	}
	noSecrets(t, dir)
}
