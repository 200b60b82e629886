package trial

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/trial/outcome"
)

// TestPlainBinaryStack: a team whose lead is the reference agent and whose
// workers run a stack of their own, a binary uploaded and pinned by
// digest, passes hello-world; each agent's record names the stack and its
// build, and the token the stack maps into a variable reaches no file.
func TestPlainBinaryStack(t *testing.T) {
	env := testEnv(t)
	dir := filepath.Join(t.TempDir(), "trial")
	tm := team(t, "testdata/manifests/plain-stack.yaml")
	st := plainStack(t)
	res, err := Run(t.Context(), env, Spec{Name: "t__plain__1", Dir: dir, Team: tm, ManifestPath: "plain-stack.yaml", Task: loadTask(t, helloWorld), Attempt: 1,
		Stacks: stack.Set{"plain": st}}, nil)
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
	for _, a := range res.Agents {
		want := stack.Builtin
		if a.ClassID == "worker" {
			want = "plain"
		}
		if a.Stack != want || !strings.HasPrefix(a.StackDigest, "sha256:") || a.ExitCode == nil && a.Usage.Calls == 0 {
			t.Errorf("agent %s: stack %q %q, usage %+v", a.ID, a.Stack, a.StackDigest, a.Usage)
		}
		if want == "plain" && a.StackDigest != st.Digest() {
			t.Errorf("agent %s: digest %s, want %s", a.ID, a.StackDigest, st.Digest())
		}
	}
	stderr, _ := os.ReadFile(filepath.Join(dir, "agents", "worker-1", "stderr.log"))
	if !strings.Contains(string(stderr), "stack plain: model mock/hello-team, mode test, channel set") {
		t.Errorf("the worker did not start through the stack's launcher:\n%s", stderr)
	}
	noSecrets(t, dir)
}
