package task

import (
	"errors"
	"strings"
	"testing"

	"github.com/troupebench/troupe/internal/located"
)

// TestTOMLProblemsAreLocated: every problem of task.toml is a
// *located.Error in the file, at the line of its key; where the lines do
// not show the key (an inline table, a quoted key), TOML's parser places
// it at its line and column.
func TestTOMLProblemsAreLocated(t *testing.T) {
	noEnv := func(string) string { return "" }
	for _, c := range []struct {
		name, toml string
		line, col  int
		path, want string
	}{
		{"a key under its table", "[agent]\ntimeout_sec = -1\n", 2, 0, "[agent] timeout_sec", "must be a number of seconds above 0"},
		{"a dotted key", "verifier.timeout_sec = \"x\"\n", 1, 0, "[verifier] timeout_sec", "must be a number"},
		{"a key in an inline table", "agent = {user = \"a\", timeout_sec = -1}\n", 1, 22, "[agent] timeout_sec", "must be a number of seconds above 0"},
		{"a quoted key", "[environment]\n\"cpus\" = 0\n", 2, 1, "[environment] cpus", "must be above 0"},
		{"a table in an inline table", "environment = {healthcheck = {retries = 0, command = \"x\"}}\n", 1, 31, "[environment.healthcheck] retries", "must be between 1 and 1000"},
		{"a key that is not there", "[environment]\nmemory = \"2GB\"\n", 0, 0, "[environment] memory_mb", "must be above 0 MiB"},
		{"the decoder's place", "[agent\n", 1, 7, "", "the rest of the file was not read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, errs := new(Task).readTOML("task.toml", []byte(c.toml), noEnv)
			var found *located.Error
			for _, e := range errs {
				if e.Path == c.path && strings.Contains(e.Err.Error(), c.want) {
					found = e
				}
			}
			if found == nil {
				t.Fatalf("no problem at %q saying %q in %v", c.path, c.want, located.List(errs))
			}
			if found.File != "task.toml" || found.Line != c.line || found.Col != c.col {
				t.Errorf("%v is at %s:%d:%d, want task.toml:%d:%d", found, found.File, found.Line, found.Col, c.line, c.col)
			}
		})
	}
}

// TestStrictRefusalsStayLocated: with --strict, a warning becomes a
// problem at the same place, saying why.
func TestStrictRefusalsStayLocated(t *testing.T) {
	dir := writeTask(t, "[agent]\ntimeout_secs = 3\n", allParts...)
	_, err := Load(dir, Options{Strict: true})
	list := located.All(err)
	if len(list) != 1 {
		t.Fatalf("want one located problem, got %d: %v", len(list), err)
	}
	if e := list[0]; e.Line != 2 || e.Col != 1 || !strings.HasSuffix(e.Error(), `unknown key "agent.timeout_secs", ignored (Harbor ignores it too); did you mean "timeout_sec"? (refused: --strict)`) {
		t.Errorf("refusal %q at %d:%d", e, e.Line, e.Col)
	}
}

// FuzzTaskTOML: any task.toml is read into values or into problems, never
// a panic, and every problem and warning is located in the file: a line
// within it, or none.
func FuzzTaskTOML(f *testing.F) {
	for _, s := range []string{"", "[agent]\ntimeout_sec = 3\n", "agent = {timeout_sec = -1}\n", "[environment.healthcheck]\nretries = 0\nx = 1\n",
		"artifacts = [\"a\", {source = 1}]\n[[environment.mcp_servers]]\nname = \"m\"\n", "\"quoted\" = 1\n[agent\n", "[verifier]\nenv = {A = \"${B}\"}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, toml string) {
		_, warnings, errs := new(Task).readTOML("task.toml", []byte(toml), func(string) string { return "" })
		lines := strings.Count(toml, "\n") + 1
		for _, e := range append(warnings, errs...) {
			if errors.Is(e, errDecoderPanic) {
				t.Fatal(e)
			}
			if e.File != "task.toml" || e.Line < 0 || e.Line > lines || e.Col < 0 || e.Line == 0 && e.Col != 0 {
				t.Fatalf("badly located: %q at line %d col %d of %d lines", e, e.Line, e.Col, lines)
			}
		}
	})
}
