package main

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/report"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trialdir"
)

// TestJSONKeysAreSnakeCase walks every type troupe writes as JSON (result
// files, event streams, reports, metering lines) down to its leaves: each
// field has a json name, in snake_case. A field without a tag is written
// with its Go name (Recorded, At), which no reader of troupe's files
// expects.
func TestJSONKeysAreSnakeCase(t *testing.T) {
	roots := []any{
		trialdir.TrialResult{}, job.Result{}, trial.Event{}, job.Event{}, job.Plan{},
		replayOutcome{}, planReport{}, validateResult{}, taskReport{}, datasetSummary{},
		report.Comparison{}, modelcall.Record{}, decide.Decision{},
	}
	name := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	marshaler := reflect.TypeFor[json.Marshaler]()
	seen := map[reflect.Type]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() == "time" {
			return
		}
		seen[typ] = true
		if typ.Implements(marshaler) || reflect.PointerTo(typ).Implements(marshaler) {
			return // it names its own keys
		}
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "-" {
				continue
			}
			if f.Anonymous && tag == "" {
				walk(path, f.Type) // its fields are the parent's
				continue
			}
			if !name.MatchString(tag) {
				t.Errorf("%s.%s (%s): json name %q is not snake_case", path, f.Name, typ, tag)
			}
			walk(path+"."+tag, f.Type)
		}
	}
	for _, r := range roots {
		typ := reflect.TypeOf(r)
		walk(typ.Name(), typ)
	}
	if len(seen) < 30 {
		t.Fatalf("walked %d types: the walk misses most of them", len(seen))
	}
}
