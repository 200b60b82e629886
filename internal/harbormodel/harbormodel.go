// Package harbormodel writes down Harbor's models of the files of a job
// folder, field by field, and checks a JSON document against one: the
// tests' stand-in for Harbor's own pydantic models, which CI cannot
// install. Harbor reads a troupe job with them (harbor view, harbor jobs
// resume), so a file troupe writes must pass them; troupe's own fields
// beside Harbor's are ignored (no model of these sets extra="forbid").
//
// The models are Harbor 0.13.1's (commit
// 2922220bf78bf22e2ff3b30147cbbe15ad02c7c9, 2026-06-09, of the full-history
// fork lieexxli/harbor of laude-institute/harbor); each table cites the
// file it is written from. Where Harbor 0.3.0 (commit 1ae29a3) differs, the
// entry says so. Where troupe promises more than Harbor checks, the entry
// says so ("troupe:").
package harbormodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Kind is the set of JSON types a field takes.
type Kind uint8

// The JSON types.
const (
	String Kind = 1 << iota
	Int
	Number // a float or an int
	Bool
	Object
	Array
	Null
)

func (k Kind) String() string {
	var names []string
	for i, name := range []string{"string", "integer", "number", "bool", "object", "array", "null"} {
		if k&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, " or ")
}

// Formats a field's strings must have.
const (
	UUID     = "uuid"      // pydantic UUID, in its canonical form
	DateTime = "date-time" // pydantic datetime, as RFC 3339
	FileURI  = "file-uri"  // an absolute file:// URI
)

// Field is one field of a model: its dotted path ("*" stands for every key
// of an object, "[]" for every element of an array), the JSON types it
// takes, whether it must be there when its parent object is, and what its
// string must look like (a Format or one of Enum).
type Field struct {
	Path     string
	Kinds    Kind
	Required bool
	Format   string
	Enum     []string
}

// Rule is one of a model's validators that matters to troupe: Check says
// what is wrong with each object at Path ("" is the document), "" if
// nothing.
type Rule struct {
	Path  string
	Check func(obj map[string]any) string
}

// Model is a Harbor model as a file holds it.
type Model struct {
	Name   string
	Fields []Field
	Rules  []Rule
}

// Problems lists what keeps data from being the model, one located problem
// each ("config.task: Cannot set both 'path' and 'name'").
func (m *Model) Problems(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	if _, ok := doc.(map[string]any); !ok {
		return []string{"not a JSON object"}
	}
	var problems []string
	for _, f := range m.Fields {
		parent, key := "", f.Path
		if i := strings.LastIndexByte(f.Path, '.'); i >= 0 {
			parent, key = f.Path[:i], f.Path[i+1:]
		}
		// A parent that is absent, null or of another type has no fields
		// to check (its own entry says whether that is allowed).
		for at, v := range lookup(doc, "", parent) {
			for path, child := range children(v, at, key) {
				if child == absent {
					if f.Required {
						problems = append(problems, path+": missing")
					}
					continue
				}
				if msg := f.check(child); msg != "" {
					problems = append(problems, path+": "+msg)
				}
			}
		}
	}
	for _, r := range m.Rules {
		for at, v := range lookup(doc, "", r.Path) {
			if obj, ok := v.(map[string]any); ok {
				if msg := r.Check(obj); msg != "" {
					problems = append(problems, cmpOr(at, "(document)")+": "+msg)
				}
			}
		}
	}
	return problems
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// absent stands for a key an object does not have.
var absent = new(struct{})

// children yields v's values at key: its field key, each of its keys for
// "*", each of its elements for "[]"; absent for a field v lacks. A v of
// another type yields nothing.
func children(v any, at, key string) func(yield func(string, any) bool) {
	return func(yield func(string, any) bool) {
		switch v := v.(type) {
		case map[string]any:
			if key == "[]" {
				return
			}
			keys := []string{key}
			if key == "*" {
				keys = slices.Sorted(maps.Keys(v))
			}
			for _, k := range keys {
				child, ok := v[k]
				if !ok {
					child = absent
				}
				if !yield(join(at, k), child) {
					return
				}
			}
		case []any:
			if key != "[]" {
				return
			}
			for i, child := range v {
				if !yield(at+"["+strconv.Itoa(i)+"]", child) {
					return
				}
			}
		}
	}
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// lookup yields the values at a dotted path below v (at is v's path), one
// for each key or element where the path has "*" or "[]".
func lookup(v any, at, path string) func(yield func(string, any) bool) {
	return func(yield func(string, any) bool) {
		var walk func(v any, at, path string) bool
		walk = func(v any, at, path string) bool {
			if path == "" {
				return yield(at, v)
			}
			key, rest, _ := strings.Cut(path, ".")
			for p, child := range children(v, at, key) {
				if child != absent && !walk(child, p, rest) {
					return false
				}
			}
			return true
		}
		walk(v, at, path)
	}
}

// CanonicalUUID matches a UUID as Python's str(uuid) writes it.
var CanonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// check says what is wrong with a field's value; "" if nothing.
func (f Field) check(v any) string {
	var kind Kind
	switch v := v.(type) {
	case nil:
		kind = Null
	case string:
		kind = String
	case bool:
		kind = Bool
	case json.Number:
		kind = Number
		if _, err := v.Int64(); err == nil {
			kind = Int
		}
	case map[string]any:
		kind = Object
	case []any:
		kind = Array
	}
	allowed := f.Kinds
	if allowed&Number != 0 {
		allowed |= Int
	}
	if kind&allowed == 0 {
		return fmt.Sprintf("%s, want %s", kind, f.Kinds)
	}
	s, ok := v.(string)
	if !ok {
		return ""
	}
	switch {
	case f.Enum != nil && !slices.Contains(f.Enum, s):
		return fmt.Sprintf("%q, want one of %s", s, strings.Join(f.Enum, ", "))
	case f.Format == UUID && !CanonicalUUID.MatchString(s):
		return fmt.Sprintf("%q is not a UUID", s)
	case f.Format == DateTime:
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return fmt.Sprintf("%q is not an RFC 3339 date-time", s)
		}
	case f.Format == FileURI:
		if u, err := url.Parse(s); err != nil || u.Scheme != "file" || !strings.HasPrefix(u.Path, "/") {
			return fmt.Sprintf("%q is not a file:// URI of an absolute path", s)
		}
	}
	return ""
}

// under is fields with their paths below prefix.
func under(prefix string, fields []Field) []Field {
	out := make([]Field, len(fields))
	for i, f := range fields {
		f.Path = prefix + "." + f.Path
		out[i] = f
	}
	return out
}

// rulesUnder is rules applied below prefix.
func rulesUnder(prefix string, rules []Rule) []Rule {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		r.Path = strings.TrimSuffix(prefix+"."+r.Path, ".")
		out[i] = r
	}
	return out
}

// set reports whether obj has key with a value other than null.
func set(obj map[string]any, key string) bool {
	v, ok := obj[key]
	return ok && v != nil
}

// CheckFile fails the test with each problem of the file at path as the
// model, and returns the file's bytes (nil, and a failed test, when it
// cannot be read).
func (m *Model) CheckFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v", m.Name, err)
		return nil
	}
	for _, p := range m.Problems(data) {
		t.Errorf("%s is not Harbor's %s: %s", path, m.Name, p)
	}
	return data
}
