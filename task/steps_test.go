package task

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeSteps makes a multi-step task folder: task.toml, environment/, and
// the files given (path: content).
func writeSteps(t testing.TB, dir, toml string, files map[string]string) string {
	t.Helper()
	all := map[string]string{"task.toml": toml, "environment/Dockerfile": "FROM busybox\n"}
	maps.Copy(all, files)
	return writeFiles(t, dir, all)
}

// twoSteps are the files of a task with steps one and two.
var twoSteps = map[string]string{
	"steps/one/instruction.md":      "Do one.\n",
	"steps/one/tests/test.sh":       "echo 1 > /logs/verifier/reward.txt\n",
	"steps/one/solution/solve.sh":   "true\n",
	"steps/one/workdir/setup.sh":    "true\n",
	"steps/one/workdir/fixture.txt": "x\n",
	"steps/two/instruction.md":      "Do two.\n",
	"tests/test.sh":                 "echo 1 > /logs/verifier/reward.txt\n",
	"tests/helpers.sh":              "true\n",
}

func TestLoadSteps(t *testing.T) {
	tk, err := Load(writeSteps(t, filepath.Join(t.TempDir(), "multi"), `
version = "1.0"
multi_step_reward_strategy = "final"
[agent]
timeout_sec = 300
user = "agent"
[verifier]
timeout_sec = 60
user = "tester"
env = {SHARED = "task", OVER = "task"}

[[steps]]
name = "one"
min_reward = 1

[steps.agent]
timeout_sec = 30.5
user = "agent"

[steps.verifier]
timeout_sec = 10
user = "root"
env = {OVER = "step", OWN = "one"}

[[steps]]
name = "two"
min_reward = {correctness = 0.8, style = "0.5"}
`, twoSteps), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.Steps) != 2 || tk.RewardStrategy != RewardFinal || tk.Instruction != "" {
		t.Fatalf("steps %+v, strategy %q, instruction %q", tk.Steps, tk.RewardStrategy, tk.Instruction)
	}
	one, two := tk.Steps[0], tk.Steps[1]
	if one.Name != "one" || one.Instruction != "Do one.\n" || one.AgentTimeout != 30500*time.Millisecond || one.VerifierTimeout != 10*time.Second || one.VerifierUser != "root" ||
		!strings.HasSuffix(one.TestsDir, filepath.Join("steps", "one", "tests")) || !strings.HasSuffix(one.SolutionDir, filepath.Join("steps", "one", "solution")) ||
		!strings.HasSuffix(one.WorkdirDir, filepath.Join("steps", "one", "workdir")) || !one.Setup || one.MinReward["reward"] != 1 || len(one.MinReward) != 1 {
		t.Errorf("step one %+v", one)
	}
	if want := map[string]string{"SHARED": "task", "OVER": "step", "OWN": "one"}; !maps.Equal(one.VerifierEnv, want) {
		t.Errorf("step one's verifier env %v, want %v", one.VerifierEnv, want)
	}
	// Step two takes the task's values.
	if two.AgentTimeout != 300*time.Second || two.VerifierTimeout != 60*time.Second || two.VerifierUser != "tester" || two.TestsDir != "" || two.SolutionDir != "" || two.WorkdirDir != "" ||
		!maps.Equal(two.VerifierEnv, map[string]string{"SHARED": "task", "OVER": "task"}) || !maps.Equal(two.MinReward, map[string]float64{"correctness": 0.8, "style": 0.5}) {
		t.Errorf("step two %+v", two)
	}
	if tk.Solved() {
		t.Error("a task whose step two has no solution (nor the task) is solved")
	}
	// The digest covers the steps' folders.
	dir := tk.Dir
	os.WriteFile(filepath.Join(dir, "steps", "two", "instruction.md"), []byte("Do two, differently.\n"), 0o644)
	again, err := Load(dir, Options{})
	if err != nil || again.Digest == tk.Digest {
		t.Errorf("the digest did not change with a step's instruction: %v", err)
	}
	// Without a strategy, Harbor's default: the mean.
	plain, err := Load(writeSteps(t, filepath.Join(t.TempDir(), "plain"), "[[steps]]\nname = \"one\"\n", twoSteps), Options{})
	if err != nil || plain.RewardStrategy != RewardMean || len(plain.Steps) != 1 || !plain.Solved() {
		t.Errorf("%+v %v", plain, err)
	}
}

func TestLoadStepsProblems(t *testing.T) {
	for _, c := range []struct {
		name, toml string
		files      map[string]string
		want, not  []string
	}{
		{name: "no step folder", toml: "[[steps]]\nname = \"three\"\n", files: twoSteps,
			want: []string{filepath.Join("steps", "three") + `: missing: [[steps]] names "three"`}},
		{name: "no test script", toml: "[[steps]]\nname = \"two\"\n", files: map[string]string{"steps/two/instruction.md": "Do two.\n"},
			want: []string{filepath.Join("steps", "two", "tests", "test.sh") + ": missing, and so is tests/test.sh: step two has no verifier"}},
		{name: "empty instruction", toml: "[[steps]]\nname = \"two\"\n", files: map[string]string{"steps/two/instruction.md": " \n", "tests/test.sh": "x\n"},
			want: []string{filepath.Join("steps", "two", "instruction.md") + ": the instruction is empty"}},
		{name: "names", toml: "[[steps]]\nname = \"../up\"\n\n[[steps]]\nname = \"one\"\n\n[[steps]]\nname = \"one\"\n\n[[steps]]\nmin_reward = 1\n", files: twoSteps,
			want: []string{`task.toml:2: [steps[1]] name: "../up" must be a folder name of steps/`, `task.toml:8: [steps[3]] name: "one" names two steps`, "task.toml:10: [steps[4]] name: is required"}},
		{name: "bad values, located in their step", toml: `
[[steps]]
name = "one"
min_reward = "high"

[steps.agent]
timeout_sec = -1

[[steps]]
name = "two"
min_reward = {reward = "x"}

[steps.verifier]
timeout_sec = 0
env = 3
`, files: twoSteps,
			want: []string{`task.toml:4: [steps.one] min_reward: must be a number, found "high"`, "task.toml:7: [steps.one.agent] timeout_sec: must be a number of seconds above 0",
				`task.toml:11: [steps.two] min_reward: must be a number, found "x"`, "task.toml:14: [steps.two.verifier] timeout_sec: must be a number of seconds above 0",
				"task.toml:15: [steps.two.verifier] env: must be a table of strings, found 3"}},
		{name: "what troupe cannot run yet", toml: `
[agent]
user = "agent"

[[steps]]
name = "one"
artifacts = ["/app/x"]

[steps.agent]
user = "other"
network_mode = "no-network"

[steps.verifier]
environment_mode = "separate"
allowed_hosts = ["pypi.org"]

[steps.healthcheck]
command = "true"
`, files: twoSteps,
			want: []string{`[steps.one] artifacts: a step's own artifacts are not supported yet`, `[steps.one.agent] user: "other" differs from [agent] user ("agent")`,
				"[steps.one.agent] network_mode: a step's own network is not supported yet", "[steps.one.verifier] environment_mode: a separate verifier environment is not supported yet",
				"[steps.one.verifier] allowed_hosts: a step's own network is not supported yet", "task.toml:17: [steps.one] healthcheck: a step's own healthcheck is not supported yet"}},
		{name: "a strategy", toml: "multi_step_reward_strategy = \"max\"\n[[steps]]\nname = \"one\"\n", files: twoSteps,
			want: []string{`task.toml:1: multi_step_reward_strategy: "max" is not "mean" or "final"`}},
		{name: "a strategy without steps", toml: "multi_step_reward_strategy = \"mean\"\n", files: map[string]string{"instruction.md": "x\n", "tests/test.sh": "x\n"},
			want: []string{"multi_step_reward_strategy: applies to multi-step tasks only"}},
		{name: "steps not a list of tables", toml: "steps = 3\n", files: twoSteps, want: []string{"steps has the wrong type"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeSteps(t, filepath.Join(t.TempDir(), "multi"), c.toml, c.files), Options{})
			checkSays(t, err, c.want, c.not)
		})
	}
	// Unknown keys of a step are warnings, at their line; strict refuses them.
	dir := writeSteps(t, filepath.Join(t.TempDir(), "warned"), "[[steps]]\nname = \"one\"\nmin_reward = 1\nmin_rewrd = 2\n\n[steps.agent]\ntimeout = 3\n", twoSteps)
	tk, err := Load(dir, Options{})
	if err != nil || len(tk.Warnings) != 2 || !strings.Contains(tk.Warnings[0], `task.toml:4: [steps.one] min_rewrd: unknown key, ignored (Harbor ignores it too); did you mean "min_reward"?`) ||
		!strings.Contains(tk.Warnings[1], "task.toml:7: [steps.one.agent] timeout: unknown key") {
		t.Errorf("%v %q", err, tk.Warnings)
	}
	if _, err := Load(dir, Options{Strict: true}); err == nil || !strings.Contains(err.Error(), "(refused: --strict)") {
		t.Errorf("strict: %v", err)
	}
}

// FuzzSteps: any [[steps]] of a task.toml is a task or an error, never a
// panic; what loads has its steps' folders and limits.
func FuzzSteps(f *testing.F) {
	for _, s := range []string{
		"[[steps]]\nname = \"one\"\n",
		"[[steps]]\nname = \"one\"\nmin_reward = {a = 1}\n[steps.agent]\ntimeout_sec = 3\n[[steps]]\nname = \"two\"\n[steps.verifier]\nenv = {A = \"b\"}\n",
		"steps = [{name = \"one\", agent = {timeout_sec = 1}}]\n",
		"[[steps]]\n[steps.verifier]\n[[steps]]\nname = \"one\"\nx.y = 1\n",
		"multi_step_reward_strategy = \"final\"\n[[ steps ]] # c\nname=\"two\"\n",
	} {
		f.Add(s)
	}
	dir := writeSteps(f, f.TempDir(), "", twoSteps)
	f.Fuzz(func(t *testing.T, toml string) {
		if err := os.WriteFile(filepath.Join(dir, "task.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		tk, err := Load(dir, Options{})
		if errors.Is(err, errDecoderPanic) {
			t.Fatal(err)
		}
		if err != nil {
			return
		}
		for _, st := range tk.Steps {
			if (st.Name != "one" && st.Name != "two") || st.Instruction == "" || st.AgentTimeout <= 0 || st.VerifierTimeout <= 0 {
				t.Fatalf("accepted step %+v", st)
			}
		}
		if len(tk.Steps) > 0 && tk.RewardStrategy != RewardMean && tk.RewardStrategy != RewardFinal {
			t.Fatalf("strategy %q", tk.RewardStrategy)
		}
	})
}
