package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestGoldenHashes parses every testdata/hash/*.yaml (the original system's
// own manifests and edge cases) and compares the canonical bytes and hash
// with those computed by testdata/orchestra_hash.py, an independent model of
// the original in Python. On a mismatch it names the first differing value.
func TestGoldenHashes(t *testing.T) {
	files, err := filepath.Glob("testdata/hash/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("golden manifests missing: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(file, ".yaml")
		t.Run(filepath.Base(name), func(t *testing.T) {
			m, err := Load(file)
			if err != nil {
				t.Fatalf("the original accepts this manifest, troupe does not:\n%v", err)
			}
			wantBytes, err := os.ReadFile(name + ".canonical.json")
			if err != nil {
				t.Fatal(err)
			}
			wantHash, err := os.ReadFile(name + ".sha256")
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Canonical(); !bytes.Equal(got, wantBytes) {
				t.Errorf("canonical bytes differ from the original's: %s", explainDiff(wantBytes, got))
			}
			if got, want := m.Hash(), strings.TrimSpace(string(wantHash)); got != want {
				t.Errorf("hash %s, the original's is %s", got, want)
			}
		})
	}
}

// explainDiff names the first JSON path whose value differs, or failing that
// the first differing byte with context.
func explainDiff(want, got []byte) string {
	var w, g any
	if json.Unmarshal(want, &w) == nil && json.Unmarshal(got, &g) == nil {
		if path := firstDiff("$", w, g); path != "" {
			return path
		}
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(i-40, 0)
	return fmt.Sprintf("same JSON values but different bytes at offset %d:\n original: …%s\n troupe:   …%s",
		i, want[lo:min(i+40, len(want))], got[lo:min(i+40, len(got))])
}

func firstDiff(path string, want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: original has an object, troupe has %v", path, got)
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			wv, wok := w[k]
			gv, gok := g[k]
			switch {
			case !wok:
				return fmt.Sprintf("%s.%s: troupe writes a key the original does not (%v)", path, k, gv)
			case !gok:
				return fmt.Sprintf("%s.%s: troupe leaves out a key the original writes (%v)", path, k, wv)
			}
			if d := firstDiff(path+"."+k, wv, gv); d != "" {
				return d
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: original has %d items, troupe has %v", path, len(w), got)
		}
		for i := range w {
			if d := firstDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); d != "" {
				return d
			}
		}
	case float64:
		if g, ok := got.(float64); !ok || math.Float64bits(g) != math.Float64bits(w) {
			return fmt.Sprintf("%s: original has %v, troupe has %v", path, want, got)
		}
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%s: original has %#v, troupe has %#v", path, want, got)
		}
	}
	return ""
}

func TestFormatPyFloat(t *testing.T) {
	// Expected values are Python's repr() of the same floats.
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{5, "5.0"},
		{-5, "-5.0"},
		{0.1, "0.1"},
		{0.30000000000000004, "0.30000000000000004"},
		{1e-06, "1e-06"},
		{1e-05, "1e-05"},
		{0.0001, "0.0001"},
		{0.00012, "0.00012"},
		{1000000.0, "1000000.0"},
		{9999999999999998.0, "9999999999999998.0"},
		{1e16, "1e+16"},
		{1.2345678901234567e+19, "1.2345678901234567e+19"},
		{1.5e300, "1.5e+300"},
		{5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{123.456, "123.456"},
	}
	for _, tt := range tests {
		if got := formatPyFloat(tt.in); got != tt.want {
			t.Errorf("formatPyFloat(%v) = %s, Python gives %s", tt.in, got, tt.want)
		}
	}
}

func TestAppendPyString(t *testing.T) {
	// Expected values are Python's json.dumps(s, ensure_ascii=False).
	tests := []struct{ in, want string }{
		{"plain", `"plain"`},
		{"quote\" back\\", `"quote\" back\\"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"\x7f", "\"\x7f\""},
		{"\u2028\u2029", "\"\u2028\u2029\""},
		{"日本/é 😀", `"日本/é 😀"`},
		{"</script>", `"</script>"`},
	}
	for _, tt := range tests {
		if got := string(appendPyString(nil, tt.in)); got != tt.want {
			t.Errorf("appendPyString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
