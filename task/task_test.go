package task

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTask makes a task folder from a task.toml and the usual parts.
func writeTask(t *testing.T, toml string, parts ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "my-task")
	files := map[string]string{"task.toml": toml}
	for _, p := range parts {
		files[p] = map[string]string{
			"instruction.md":         "Do the thing.\n",
			"environment/Dockerfile": "FROM busybox\n",
			"tests/test.sh":          "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n",
		}[p]
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var allParts = []string{"instruction.md", "environment/Dockerfile", "tests/test.sh"}

func TestLoadTask(t *testing.T) {
	tk, err := Load(writeTask(t, `
version = "1.0"
[metadata]
author = "x"
tags = ["a"]
[agent]
timeout_sec = 90.5
[verifier]
timeout_sec = 30
env = {TOKEN_LIMIT = "3"}
[environment]
cpus = 2
memory_mb = 1024
network_mode = "public"
`, allParts...))
	if err != nil {
		t.Fatal(err)
	}
	if tk.Name != "my-task" || tk.AgentTimeout != 90500*time.Millisecond || tk.VerifierTimeout != 30*time.Second || tk.BuildTimeout != DefaultBuildTimeout ||
		tk.CPUs != 2 || tk.MemoryMB != 1024 || !tk.Internet || tk.VerifierEnv["TOKEN_LIMIT"] != "3" || tk.EnvDir == "" || !strings.HasPrefix(tk.Digest, "sha256:") ||
		tk.Instruction != "Do the thing.\n" {
		t.Errorf("task %+v", tk)
	}
	// The digest follows the content.
	dir := writeTask(t, "", allParts...)
	a, _ := Load(dir)
	os.WriteFile(filepath.Join(dir, "instruction.md"), []byte("Do another thing.\n"), 0o644)
	b, _ := Load(dir)
	if a.Digest == b.Digest {
		t.Error("the digest did not change with the instruction")
	}
}

func TestLoadTaskProblems(t *testing.T) {
	for _, c := range []struct {
		name, toml string
		parts      []string
		want       []string
	}{
		{"misspelled key", "[agent]\ntimeout_secs = 3\n", allParts, []string{`task.toml:2:1: unknown key "agent.timeout_secs"; did you mean "timeout_sec"?`}},
		{"unknown table", "[agnet]\ntimeout_sec = 3\n", allParts, []string{`unknown key "agnet"; did you mean "agent"?`}},
		{"syntax", "[agent\n", allParts, []string{"task.toml:1:"}},
		{"wrong type", "[environment]\nmemory_mb = \"lots\"\n", allParts, []string{"task.toml:2:", "memory_mb has the wrong type"}},
		{"bad values", "[agent]\ntimeout_sec = -1\n[environment]\ncpus = 0\nmemory_mb = 0\n", allParts,
			[]string{"[agent] timeout_sec must be a number of seconds above 0", "cpus must be above 0", "memory_mb must be above 0"}},
		{"unsupported", "[environment]\ngpus = 1\nnetwork_mode = \"allowlist\"\nenv = {A = \"b\"}\n[verifier]\nenvironment_mode = \"separate\"\n[[steps]]\nname = \"one\"\n", allParts,
			[]string{"gpus = 1", `network_mode "allowlist" is not supported`, "[environment] env is not supported", `environment_mode "separate"`, "[[steps]]"}},
		{"missing parts", "", nil, []string{"instruction.md: open", "no environment/Dockerfile and no [environment] docker_image", "tests/test.sh is missing"}},
		{"empty instruction", "", []string{"environment/Dockerfile", "tests/test.sh"}, []string{"instruction.md: open"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeTask(t, c.toml, c.parts...))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "nothing")); err == nil || !strings.Contains(err.Error(), "a Harbor task folder holds task.toml") {
		t.Errorf("no folder: %v", err)
	}
}

func TestFindTasks(t *testing.T) {
	one := writeTask(t, "", allParts...)
	dataset := filepath.Dir(one)
	tasks, err := Find([]string{dataset})
	if err != nil || len(tasks) != 1 || tasks[0].Name != "my-task" {
		t.Fatalf("%v %v", tasks, err)
	}
	if _, err := Find([]string{one, dataset}); err == nil || !strings.Contains(err.Error(), "two tasks are named my-task") {
		t.Errorf("duplicate names: %v", err)
	}
	if _, err := Find([]string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "neither a task") {
		t.Errorf("empty folder: %v", err)
	}
}

// FuzzLoad: any task.toml is a task or an error, never a panic.
func FuzzLoadTask(f *testing.F) {
	for _, s := range []string{"", "[agent]\ntimeout_sec = 3\n", "[environment]\ncpus = 1.5\nmemory_mb = 1\n", "x = [1, {a = 2}]\n[[steps]]\n", "[verifier]\nenv = {a = \"b\"}\n"} {
		f.Add(s)
	}
	dir := f.TempDir()
	for _, p := range []string{"instruction.md", "environment/Dockerfile", "tests/test.sh"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte("x\n"), 0o644)
	}
	f.Fuzz(func(t *testing.T, toml string) {
		if err := os.WriteFile(filepath.Join(dir, "task.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		tk, err := Load(dir)
		if errors.Is(err, errDecoderPanic) {
			t.Fatal(err)
		}
		if err == nil && (tk.AgentTimeout <= 0 || tk.VerifierTimeout <= 0 || tk.CPUs < 0) {
			t.Fatalf("accepted %+v", tk)
		}
	})
}
