package yaml11

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/troupebench/troupe/internal/located"
)

// TestMatchesPyYAML parses every testdata/pyyaml/*.yaml and compares the result
// with what PyYAML's safe_load produced for the same bytes (the .want.json
// files, written by testdata/pyyaml.py). Files named stricter-* are documents
// PyYAML accepts and troupe deliberately refuses (duplicate keys, recursion).
func TestMatchesPyYAML(t *testing.T) {
	files, err := filepath.Glob("testdata/pyyaml/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			wantRaw, err := os.ReadFile(strings.TrimSuffix(file, ".yaml") + ".want.json")
			if err != nil {
				t.Fatalf("no expectation (run testdata/pyyaml.py): %v", err)
			}
			var want struct {
				Value     any    `json:"value"`
				Error     string `json:"error"`
				Recursive bool   `json:"recursive"`
			}
			if err := json.Unmarshal(wantRaw, &want); err != nil {
				t.Fatal(err)
			}
			got, err := Parse(file, data)
			switch {
			case strings.HasPrefix(name, "stricter-"):
				if err == nil {
					t.Fatalf("troupe accepted a document it must refuse (PyYAML: %s)", wantRaw)
				}
				assertLocated(t, err)
			case want.Error != "":
				if err == nil {
					t.Fatalf("PyYAML refuses this document (%s) but Parse accepted it", want.Error)
				}
				assertLocated(t, err)
			default:
				if err != nil {
					t.Fatalf("PyYAML loads this document but Parse failed: %v", err)
				}
				if diff := compareTagged("$", want.Value, got); diff != "" {
					t.Error(diff)
				}
			}
		})
	}
}

func assertLocated(t *testing.T, err error) {
	t.Helper()
	e, ok := err.(*located.Error)
	if !ok {
		t.Fatalf("error %T is not a *located.Error: %v", err, err)
	}
	if e.Line < 1 || e.Col < 1 {
		t.Errorf("error has no place: %v", err)
	}
}

// compareTagged walks PyYAML's tagged value and the Node side by side and
// describes the first difference.
func compareTagged(path string, want any, got *Node) string {
	w, ok := want.(map[string]any)
	if !ok || len(w) != 1 {
		return fmt.Sprintf("%s: malformed expectation %v", path, want)
	}
	for tag, v := range w {
		mismatch := func(detail string) string {
			return fmt.Sprintf("%s (line %d col %d): PyYAML has %s %v, Parse has %s %q (%s)", path, got.Line, got.Col, tag, v, got.Kind, got.Text, detail)
		}
		switch tag {
		case "null":
			if got.Kind != Null {
				return mismatch("kind")
			}
		case "bool":
			if got.Kind != Bool || got.Bool != v.(bool) {
				return mismatch("value")
			}
		case "int":
			if got.Kind != Int || got.Int.String() != v.(string) {
				return mismatch("value")
			}
		case "float":
			if got.Kind != Float {
				return mismatch("kind")
			}
			if !sameFloat(v.(string), got.Float) {
				return mismatch(fmt.Sprintf("bits: Parse has %x", math.Float64bits(got.Float)))
			}
		case "str":
			if got.Kind != String || got.Text != v.(string) {
				return mismatch("value")
			}
		case "timestamp":
			if got.Kind != Timestamp {
				return mismatch("kind")
			}
		case "seq":
			items := v.([]any)
			if got.Kind != Seq || len(got.Items) != len(items) {
				return mismatch(fmt.Sprintf("%d items", len(got.Items)))
			}
			for i, item := range items {
				if d := compareTagged(fmt.Sprintf("%s[%d]", path, i), item, got.Items[i]); d != "" {
					return d
				}
			}
		case "map":
			pairs := v.([]any)
			if got.Kind != Map || len(got.Pairs) != len(pairs) {
				return mismatch(fmt.Sprintf("%d pairs", len(got.Pairs)))
			}
			for i, p := range pairs {
				kv := p.([]any)
				if d := compareTagged(fmt.Sprintf("%s.key#%d", path, i), kv[0], got.Pairs[i].Key); d != "" {
					return d
				}
				if d := compareTagged(fmt.Sprintf("%s[%s]", path, got.Pairs[i].Key.Text), kv[1], got.Pairs[i].Value); d != "" {
					return d
				}
			}
		default:
			return fmt.Sprintf("%s: unknown tag %q", path, tag)
		}
	}
	return ""
}

func sameFloat(want string, got float64) bool {
	switch want {
	case "nan":
		return math.IsNaN(got)
	case "inf":
		return math.IsInf(got, 1)
	case "-inf":
		return math.IsInf(got, -1)
	}
	w, err := strconv.ParseFloat(want, 64)
	return err == nil && math.Float64bits(w) == math.Float64bits(got)
}
