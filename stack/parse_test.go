package stack

import (
	"errors"
	"strings"
	"testing"

	"github.com/troupebench/troupe/internal/located"
)

// TestParseFileLocatesEveryProblem: a stacks file's bytes give a set, or
// every problem as a *located.Error at its line, column and key, the
// YAML reader's own included; a stack that fails its checks keeps the
// reason as its cause.
func TestParseFileLocatesEveryProblem(t *testing.T) {
	for _, c := range []struct {
		name, doc       string
		line, col       int
		path, want      string
		stacks, entries int
	}{
		{"a good file", "stacks:\n  g:\n    command: [x]\n", 0, 0, "", "", 1, 0},
		{"an empty file", "", 0, 0, "", "", 0, 0},
		{"a misspelt key", "stacks:\n  g:\n    comand: [x]\n", 3, 5, "stacks.g.comand", `did you mean "command"`, 0, 1},
		{"a bad mode", "stacks:\n  g:\n    command: [x]\n    files:\n      - {path: a, to: /a, sha256: x, mode: \"rwx\"}\n", 5, 44, "stacks.g.files[0].mode", "must be an octal mode", 0, 1},
		{"a failed check", "stacks:\n  g:\n    command: [x]\n    fixed_env: {TROUPE_CHANNEL: c}\n", 3, 5, "stacks.g", "TROUPE_CHANNEL is the contract's own", 0, 1},
		{"not YAML", "stacks: [\n", 1, 9, "", "YAML syntax", 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, err := ParseFile("/s/stacks.yaml", []byte(c.doc))
			if c.want == "" {
				if err != nil || len(set) != c.stacks {
					t.Fatalf("got %d stacks, %v; want %d", len(set), err, c.stacks)
				}
				return
			}
			list := located.All(err)
			if len(list) != c.entries {
				t.Fatalf("want %d located problems, got %d: %v", c.entries, len(list), err)
			}
			var found *located.Error
			for _, e := range list {
				if e.Path == c.path && strings.Contains(e.Err.Error(), c.want) {
					found = e
				}
			}
			if found == nil {
				t.Fatalf("no problem at %q saying %q: %v", c.path, c.want, err)
			}
			if found.File != "/s/stacks.yaml" || found.Line != c.line || found.Col != c.col {
				t.Errorf("%v at %d:%d, want %d:%d", found, found.Line, found.Col, c.line, c.col)
			}
		})
	}
	_, err := ParseFile("f.yaml", []byte("stacks:\n  g:\n    command: [x]\n    install_user: \"a b\"\n"))
	if e, ok := errors.AsType[*located.Error](err); !ok || errors.Unwrap(e.Err) == nil || !strings.Contains(errors.Unwrap(e.Err).Error(), "install_user") {
		t.Errorf("a failed check's reason is not the problem's cause: %v", err)
	}
}
