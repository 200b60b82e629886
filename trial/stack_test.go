package trial

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
)

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// plainStack is a stack that is a plain binary following the contract (a
// copy of troupe's own, uploaded), started by a launcher script that reads
// the token from the variable the stack maps it to.
func plainStack(t *testing.T) *stack.Stack {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(bin, testBinary(t).Data, 0o755); err != nil {
		t.Fatal(err)
	}
	run, _ := filepath.Abs("testdata/stacks/plain/run.sh")
	return &stack.Stack{
		Name: "plain", Source: "the test",
		Files: []stack.File{
			{Path: bin, To: "/opt/plain/bin/agent", Mode: 0o755, SHA256: fileDigest(t, bin)},
			{Path: run, To: "/opt/plain/run.sh", Mode: 0o755, SHA256: fileDigest(t, run)},
		},
		Command:  []string{"/opt/plain/run.sh"},
		Env:      map[string]string{"MY_TOKEN": stack.ValueToken, "MY_MODEL": stack.ValueModel},
		FixedEnv: map[string]string{"PLAIN_MODE": "test"},
	}
}

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

// TestStackRefusals: a stack that cannot run, or that would change who an
// agent is, is refused before any container starts, naming the file or
// the variable.
func TestStackRefusals(t *testing.T) {
	env := testEnv(t)
	good := plainStack(t)
	for _, c := range []struct {
		name   string
		stacks stack.Set
		want   string
	}{
		{"undefined", stack.Set{}, `harness "plain" names no stack`},
		{"digest mismatch", func() stack.Set {
			st := *good
			st.Files = append([]stack.File(nil), good.Files...)
			st.Files[1].SHA256 = "sha256:" + strings.Repeat("0", 64)
			return stack.Set{"plain": &st}
		}(), "run.sh has sha256:"},
		{"identity override", func() stack.Set {
			st := *good
			st.FixedEnv = map[string]string{"TROUPE_CHANNEL": "another-trial"}
			return stack.Set{"plain": &st}
		}(), "fixed_env: TROUPE_CHANNEL is the contract's own"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "job")
			_, err := RunJob(t.Context(), env, JobSpec{Dir: out, Attempts: 1, Concurrency: 1, Tasks: []*task.Task{loadTask(t, helloWorld)},
				Conditions: []Condition{{Path: "plain-stack.yaml", Team: team(t, "testdata/manifests/plain-stack.yaml"), Stacks: c.stacks}}}, Progress{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v does not say %q", err, c.want)
			}
			if entries, _ := os.ReadDir(out); len(entries) > 0 {
				t.Errorf("the refused job wrote %v", entries)
			}
		})
	}
}
