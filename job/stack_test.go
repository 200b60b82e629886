package job

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/trialtest"
)

// TestStackRefusals: a stack that cannot run, or that would change who an
// agent is, is refused before any container starts, naming the file or
// the variable.
func TestStackRefusals(t *testing.T) {
	env := testEnv(t)
	good := trialtest.PlainStack(t)
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
			_, err := Run(t.Context(), env, Spec{Dir: out, Attempts: 1, Concurrency: 1, Tasks: []*task.Task{loadTask(t, helloWorld)},
				Conditions: []Condition{{Path: "plain-stack.yaml", Team: team(t, testdata("manifests", "plain-stack.yaml")), Stacks: c.stacks}}}, Progress{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v does not say %q", err, c.want)
			}
			if entries, _ := os.ReadDir(out); len(entries) > 0 {
				t.Errorf("the refused job wrote %v", entries)
			}
		})
	}
}
