package yaml11

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/internal/located"
)

func TestParsePositions(t *testing.T) {
	doc := "# head\nroster:\n  - id: é\n    count: 2\n  - {id: b, count: x}\nprices: {}\n"
	root, err := Parse("m.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	roster := root.Get("roster")
	tests := []struct {
		name      string
		node      *Node
		line, col int
	}{
		{"root mapping at its first key", root, 2, 1},
		{"block sequence at its dash", roster, 3, 3},
		{"mapping in a sequence at its first key", roster.Items[0], 3, 5},
		{"value after a multibyte character", roster.Items[0].Get("count"), 4, 12},
		{"flow mapping at its brace", roster.Items[1], 5, 5},
		{"value in a flow mapping", roster.Items[1].Get("count"), 5, 20},
	}
	for _, tt := range tests {
		if tt.node == nil {
			t.Errorf("%s: node missing", tt.name)
			continue
		}
		if tt.node.Line != tt.line || tt.node.Col != tt.col {
			t.Errorf("%s: at %d:%d, want %d:%d", tt.name, tt.node.Line, tt.node.Col, tt.line, tt.col)
		}
	}
}

func TestParseRefusesHostileInput(t *testing.T) {
	laughs := []string{`a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]`}
	for i := 1; i < 10; i++ {
		laughs = append(laughs, fmt.Sprintf("a%d: &a%d [%s]", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 9), ",")))
	}
	var manyKeys strings.Builder
	for i := range MaxMappingEntries + 1 {
		fmt.Fprintf(&manyKeys, "k%d: %d\n", i, i)
	}
	var deep strings.Builder
	for i := range MaxDepth + 5 {
		fmt.Fprintf(&deep, "%sk:\n", strings.Repeat(" ", i))
	}
	tests := []struct {
		name, doc, want string
	}{
		{"billion laughs", strings.Join(laughs, "\n"), "expands to more than"},
		{"huge block mapping", manyKeys.String(), "keys in one mapping"},
		{"deep nesting", deep.String(), "levels deep"},
		{"flow nesting", "a: " + strings.Repeat("[", MaxDepth+5) + strings.Repeat("]", MaxDepth+5), "levels deep"},
		{"recursive alias", "a: &x {b: *x}", "recursive"},
		{"undefined alias", "a: *nope", "no anchor"},
		{"two documents", "a: 1\n---\nb: 2\n", "single YAML document"},
		{"invalid utf-8", "a: \xff\n", "invalid UTF-8"},
		{"control character", "a: \x01\n", "not allowed"},
		{"tab", "a:\n\tb: 1\n", "tab character"},
		{"syntax", "a: [1, 2\n", "YAML syntax"},
		{"duplicate key", "a: 1\nb: 2\na: 3\n", "already defined"},
		{"duplicate after resolution", "0x1F: a\n31: b\n", "already defined"},
		{"merge of a scalar", "a: {<<: 1}", "merge key"},
		{"unsupported tag", "a: !!binary aGk=", "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := Parse("x.yaml", []byte(tt.doc))
			if elapsed := time.Since(start); elapsed > 2*time.Second {
				t.Errorf("took %v to refuse", elapsed)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			e, ok := errors.AsType[*located.Error](err)
			if !ok || e.Line < 1 || e.Col < 1 || e.File != "x.yaml" {
				t.Errorf("error is not located in x.yaml: %#v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

// TestParseRefusesCostlyInputQuickly feeds documents just under a manifest's
// size limit on which goccy's parser takes time quadratic in their size
// (tens of seconds to minutes each) unless checkStructure refuses them from
// the token stream first.
func TestParseRefusesCostlyInputQuickly(t *testing.T) {
	const size = 900 << 10
	rep := strings.Repeat
	tests := []struct {
		name, doc, want string
	}{
		{"many documents", rep("---\na\n", size/6), "single YAML document"},
		{"deep flow nesting", rep("[", size/2) + rep("]", size/2), "levels deep"},
		{"unclosed flow mappings", rep("{a: ", size/4), "levels deep"},
		{"deep block nesting", rep("- ", size/2) + "a\n", "levels deep"},
		{"long key over many items", rep("k", size/2) + ":\n" + rep("- a\n", size/8), "paths to this document's values"},
		{"anchored long key over a flow list", "&x " + rep("k", size/2) + ": [" + rep("a,", size/4) + "]\n", "paths to this document's values"},
	}
	// The bound is relative to an ordinary document of the same size, parsed
	// first in the same process: an attack must be refused in linear time,
	// as any document is read, not in the time a super-linear blowup takes.
	// An absolute bound (10 s) failed under -race on a loaded 2-core CI
	// machine, where an attack refused in 2.8 s alone took over 10.
	start := time.Now()
	if _, err := Parse("ordinary.yaml", []byte(rep("- a\n", size/4))); err != nil {
		t.Fatal(err)
	}
	ordinary := time.Since(start)
	limit := 4*ordinary + time.Second
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := Parse("x.yaml", []byte(tt.doc))
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, want an error saying %q", err, tt.want)
				}
				assertLocated(t, err)
			case <-time.After(limit):
				t.Fatalf("still parsing %d bytes after %v (an ordinary document of %d bytes took %v)", len(tt.doc), limit, size, ordinary)
			}
		})
	}
}

func TestParseAcceptsLargeOrdinaryDocuments(t *testing.T) {
	var b strings.Builder
	b.WriteString("roster:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "  - {id: w%d, kind: worker, count: 1}\n", i)
	}
	root, err := Parse("big.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(root.Get("roster").Items); got != 2000 {
		t.Fatalf("roster has %d items", got)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, doc := range []string{"", "# only a comment\n", "\ufeff", "---\n"} {
		root, err := Parse("e.yaml", []byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if root.Kind != Null {
			t.Errorf("%q: root is %s, want null", doc, root.Kind)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"a: 1", "a: [1, {b: c}]", "a: &x 1\nb: *x", "<<: {a: 1}", "- !!int 010", "a: |\n  x\n",
		"a: 'q''q'", "a: \"\\u00e9\"", "? x\n: y", "a: 1\n---\n", "{a: [b, {c: d}]}", "a:\n  - b\n  -\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		root, err := Parse("fuzz.yaml", data)
		if err != nil {
			e, ok := errors.AsType[*located.Error](err)
			if !ok || e.Line < 1 || e.Col < 1 {
				t.Fatalf("unlocated error %#v", err)
			}
			return
		}
		if root.size > MaxNodes {
			t.Fatalf("accepted a document of %d nodes", root.size)
		}
	})
}
