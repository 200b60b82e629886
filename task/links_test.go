package task

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/task/taskfs"
)

// TestLoadRefusesLinksOutOfTheTask: the attack of issue 33, on a local
// task. Every link is lexically inside the folder; followed one after the
// other they reach a .env beside it. Load refuses the task, naming the
// file, and the secret is nowhere in what it returns.
func TestLoadRefusesLinksOutOfTheTask(t *testing.T) {
	const secret = "sk-troupe-secret-0123456789"
	cases := []struct {
		name  string
		links map[string]string
		// remove is the real part each link stands for.
		remove []string
		// named is what the error must say.
		named string
	}{
		{name: "instruction.md through a chain", links: map[string]string{"docs/up": "..", "docs/host": "up/..", "instruction.md": "docs/host/.env"},
			remove: []string{"instruction.md"}, named: "instruction.md"},
		{name: "task.toml", links: map[string]string{"docs/up": "..", "task.toml": "docs/up/../.env"},
			remove: []string{"task.toml"}, named: "task.toml"},
		{name: "tests/ out", links: map[string]string{"docs/up": "..", "tests": "docs/up/../outside-tests"},
			remove: []string{"tests/test.sh"}, named: "tests"},
		{name: "environment/ out", links: map[string]string{"docs/up": "..", "environment": "docs/up/../outside-env"},
			remove: []string{"environment/Dockerfile"}, named: "environment"},
		{name: "solution/ out", links: map[string]string{"docs/up": "..", "solution": "docs/up/../outside-solution"},
			named: "solution"},
		{name: "an unused link out", links: map[string]string{"docs/up": "..", "environment/data": "../docs/up/../.env"},
			named: "environment/data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeTask(t, "version = \"1.0\"\n", allParts...)
			host := filepath.Dir(dir)
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.WriteFile(filepath.Join(host, ".env"), []byte("OPENAI_API_KEY="+secret+"\n"), 0o600))
			for _, sub := range []string{"outside-tests", "outside-env", "outside-solution"} {
				must(os.MkdirAll(filepath.Join(host, sub), 0o755))
			}
			must(os.WriteFile(filepath.Join(host, "outside-tests", "test.sh"), []byte("#!/bin/sh\necho "+secret+"\n"), 0o755))
			must(os.WriteFile(filepath.Join(host, "outside-env", "Dockerfile"), []byte("FROM busybox\n# "+secret+"\n"), 0o644))
			must(os.WriteFile(filepath.Join(host, "outside-solution", "solve.sh"), []byte("#!/bin/sh\necho "+secret+"\n"), 0o755))
			for _, r := range c.remove {
				must(os.RemoveAll(filepath.Join(dir, r)))
			}
			for name, target := range c.links {
				p := filepath.Join(dir, filepath.FromSlash(name))
				os.RemoveAll(p)
				must(os.MkdirAll(filepath.Dir(p), 0o755))
				must(os.Symlink(target, p))
			}
			tk, err := Load(dir, Options{})
			if err == nil {
				t.Fatalf("loaded: instruction %q, tests %s, environment %s, solution %s", tk.Instruction, tk.TestsDir, tk.EnvDir, tk.SolutionDir)
			}
			if !errors.Is(err, taskfs.ErrOutside) {
				t.Errorf("not a link error: %v", err)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, c.named)) || !strings.Contains(err.Error(), "outside the task's folder") {
				t.Errorf("the error does not name %s: %v", c.named, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error holds the secret: %v", err)
			}
		})
	}
}

// TestLoadFollowsLinksInside: links that stay in the folder are a task's
// own business.
func TestLoadFollowsLinksInside(t *testing.T) {
	dir := writeTask(t, "version = \"1.0\"\n", allParts...)
	os.MkdirAll(filepath.Join(dir, "docs"), 0o755)
	os.WriteFile(filepath.Join(dir, "docs", "task.md"), []byte("Do the linked thing.\n"), 0o644)
	os.Remove(filepath.Join(dir, "instruction.md"))
	os.Symlink("docs/up/docs/task.md", filepath.Join(dir, "instruction.md"))
	os.Symlink("..", filepath.Join(dir, "docs", "up"))
	os.Rename(filepath.Join(dir, "tests"), filepath.Join(dir, "real-tests"))
	os.Symlink("real-tests", filepath.Join(dir, "tests"))
	tk, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Instruction != "Do the linked thing.\n" || tk.TestsDir != filepath.Join(dir, "real-tests") {
		t.Errorf("instruction %q, tests %s", tk.Instruction, tk.TestsDir)
	}
}
