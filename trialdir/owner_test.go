package trialdir

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/troupebench/troupe/contract"
)

// TestOneOwnerPerFormat walks every package of the module (its non-test
// files) and fails where a format is declared a second time outside its
// owner: a transcript line (a received_at field), a members.json line (a
// struct of exactly id, role, kind and pubkey), a conversation record's
// block references ($blocks, $prefix) or call (an answer_text or
// answer_omitted field) and a metering line of llm-calls.jsonl (a call's
// latency_ms or ttfb_ms) outside modelcall, a trial file's name spelled
// as a literal, the message kind 9 compared by number, the DONE: prefix
// spelled outside package channel, a folder digest's entry (path, NUL,
// mode, NUL) hashed outside task/taskfs, a loader's located error (a
// struct with Line, Col and Err) outside internal/located, or a trial's
// result.json or a part of it (resultParts) outside trialdir. A second
// copy is where a writer and a reader come to differ.
func TestOneOwnerPerFormat(t *testing.T) {
	owners := map[string]string{ // what → the folder that owns it
		"transcript line": "trialdir", "members line": "trialdir", "trial file name": "trialdir", "trial result": "trialdir",
		"record block reference": "modelcall", "record call": "modelcall", "metering line": "modelcall",
		"message kind": "channel", "DONE: prefix": "channel",
		"folder digest entry": "task/taskfs",
		"located error":       "internal/located",
	}
	// Every file name of a trial folder and a job folder, each with the
	// packages that may spell it besides trialdir: config.json is also
	// Docker's own configuration file (runtime/docker's push).
	names := map[string][]string{}
	for _, n := range []string{Members, Transcript, Audit, "members.json", "transcript.jsonl", "audit.jsonl",
		JobLog, JobLock, Superseded, JobResult, Log, VerifierStdout, VerifierStderr, RewardText, RewardJSON, ArtifactsManifest,
		"test-stdout.txt", "test-stderr.txt", "reward.txt", "reward.json", "stdout.log", "stderr.log",
		"llm-calls.jsonl", conversation, conversation + ".gz"} {
		names[n] = nil
	}
	names[Config] = []string{"runtime/docker"}
	// A sequential job's record is decide's, with its file's name; the
	// system prompt's name is the stack contract's, which the trial
	// folder's copy takes.
	names["sequential.json"] = []string{"decide"}
	names[contract.PromptFile] = []string{"contract"}
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if base := d.Name(); path != ".." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "artifacts") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		dir := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))
		found := func(n ast.Node, what, detail string) {
			if dir != owners[what] {
				t.Errorf("%s: a %s (%s) outside package %s, which owns it", fset.Position(n.Pos()), what, detail, owners[what])
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.StructType:
				var tags, fields []string
				for _, field := range n.Fields.List {
					for _, name := range field.Names {
						fields = append(fields, name.Name)
					}
					if field.Tag == nil {
						continue
					}
					tag, _ := strconv.Unquote(field.Tag.Value)
					name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
					tags = append(tags, name)
					switch name {
					case "received_at":
						found(field, "transcript line", "a received_at field")
					case "$blocks", "$prefix", "$block":
						found(field, "record block reference", name)
					case "answer_text", "answer_omitted":
						found(field, "record call", "an "+name+" field")
					case "latency_ms", "ttfb_ms":
						found(field, "metering line", "a "+name+" field")
					}
				}
				if part := resultPart(tags); part != "" {
					found(n, "trial result", part)
				}
				slices.Sort(tags)
				if slices.Equal(tags, []string{"id", "kind", "pubkey", "role"}) {
					found(n, "members line", "id, role, kind, pubkey")
				}
				if slices.Contains(fields, "Line") && slices.Contains(fields, "Col") && slices.Contains(fields, "Err") {
					found(n, "located error", "Line, Col and Err")
				}
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				s, _ := strconv.Unquote(n.Value)
				if also, ok := names[s]; ok && !slices.Contains(also, dir) {
					found(n, "trial file name", s)
				}
				if s == "DONE:" {
					found(n, "DONE: prefix", s)
				}
				if s == "%s\x00%o\x00" {
					found(n, "folder digest entry", strconv.Quote(s))
				}
			case *ast.BinaryExpr:
				sel, ok := n.X.(*ast.SelectorExpr)
				lit, isLit := n.Y.(*ast.BasicLit)
				if ok && isLit && sel.Sel.Name == "Kind" && lit.Kind == token.INT && (n.Op == token.EQL || n.Op == token.NEQ) {
					found(n, "message kind", "Kind compared with "+lit.Value)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 150 {
		t.Fatalf("walked %d files: the walk misses the module", files)
	}
}

// resultParts are the json names that make a struct a trial's result.json
// or a part of it: a struct with every name of one entry is one, whatever
// else it has. Each entry is what that part alone has among troupe's
// formats (a job's result.json also counts n_input_tokens; troupe replay's
// report also has a completion_reason and a recorded_outcome).
var resultParts = []struct {
	part string
	tags []string
}{
	{"the result", []string{"troupe_trial_id"}},
	{"the result", []string{"trial_name", "completion_reason"}},
	{"its agent_result", []string{"n_input_tokens", "n_calls"}},
	{"its exception_info", []string{"exception_type"}},
	{"an agent of it", []string{"kind", "usage"}},
	{"its relay counts", []string{"ignored_done"}},
	{"its replay", []string{"source", "recorded_outcome"}},
	{"its network", []string{"asked", "given"}},
	{"an install of it", []string{"stack_digest", "cached"}},
	{"its Harbor config", []string{"trials_dir"}},
	{"the trial's config.json", []string{"job_id", "trial_name"}},
}

// resultPart names the part of a result.json a struct's json names
// declare, "" for none.
func resultPart(tags []string) string {
	for _, p := range resultParts {
		if !slices.ContainsFunc(p.tags, func(tag string) bool { return !slices.Contains(tags, tag) }) {
			return p.part + ": " + strings.Join(p.tags, ", ")
		}
	}
	return ""
}
