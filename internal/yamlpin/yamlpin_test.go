package yamlpin

import (
	"errors"
	"strings"
	"testing"

	"github.com/troupebench/troupe/internal/yaml11"
)

// pins finds the pins of a document's top-level pins: list.
func pins(file string, root *yaml11.Node) ([]Site, error) {
	d := yaml11.Decoder{File: file}
	var sites []Site
	if list := root.Get("pins"); list != nil && list.Kind == yaml11.Seq {
		for i, n := range list.Items {
			if s, ok := NewSite(&d, n, yaml11.Index("pins", i)); ok {
				sites = append(sites, s)
			}
		}
	}
	return sites, d.Err()
}

// TestRewrite: a digest is written in the pin's own quoting, and one with
// a colon (sha256:…) is quoted where the document has no quote for it;
// nothing else of the text changes.
func TestRewrite(t *testing.T) {
	const sum = "sha256:abc"
	for _, c := range []struct{ name, doc, want string }{
		{"a plain digest", "pins:\n  - path: a   # keep\n    sha256: old   # stale\n", "pins:\n  - path: a   # keep\n    sha256: \"sha256:abc\"   # stale\n"},
		{"a single-quoted digest", "pins:\n  - {path: a, sha256: 'old'}\n", "pins:\n  - {path: a, sha256: 'sha256:abc'}\n"},
		{"no sha256 in a flow mapping", "pins:\n  - {path: a, to: /x}\n", "pins:\n  - {path: a, sha256: \"sha256:abc\", to: /x}\n"},
		{"no sha256 in a block mapping", "pins:\n  - path: a\n    to: /x\n", "pins:\n  - path: a\n    sha256: \"sha256:abc\"\n    to: /x\n"},
		{"an empty sha256", "pins:\n  - path: a\n    sha256:\n", "pins:\n  - path: a\n    sha256: \"sha256:abc\"\n"},
		{"a current digest", "pins:\n  - {path: a, sha256: sha256:abc}\n", "pins:\n  - {path: a, sha256: sha256:abc}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, changes, err := Rewrite("f.yaml", []byte(c.doc), pins, func(Site) (string, error) { return sum, nil })
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want {
				t.Errorf("got\n%s\nwant\n%s", out, c.want)
			}
			if wantChanges := c.doc != c.want; (len(changes) == 1) != wantChanges {
				t.Errorf("changes %+v", changes)
			}
		})
	}
	_, _, err := Rewrite("f.yaml", []byte("pins:\n  - {path: gone, sha256: x}\n"), pins, func(s Site) (string, error) {
		return "", errors.New(s.Path() + " does not exist")
	})
	if err == nil || err.Error() != "f.yaml:2:12: pins[0].path: gone does not exist" {
		t.Errorf("a file that cannot be read: %v", err)
	}
	if _, _, err := Rewrite("f.yaml", []byte("pins:\n  - {path: a, sha256: \"x\n    y\"}\n"), pins, func(Site) (string, error) { return sum, nil }); err == nil || !strings.Contains(err.Error(), "put it on one line") {
		t.Errorf("a digest over two lines: %v", err)
	}
}
