package manifest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/internal/located"
)

const pin = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881" // sha256("x")

const baseManifest = `schema_version: "1"
condition: base
roster:
  - id: orch
    kind: orchestrator
    role: lead
    count: 1
    endpoint: ep-a
    model_revision: rev-a
    prompt: {path: lead.md, sha256: ` + pin + `}
  - id: worker
    kind: worker
    role: implementer
    count: 2
    endpoint: ep-b
    model_revision: rev-b
    prompt: {path: worker.md, sha256: ` + pin + `}
    generation: {max_output_tokens: 4096, context_window_tokens: 128000}
prices:
  ep-a: {input_per_million_usd: 5, cached_input_per_million_usd: 0.5, output_per_million_usd: 25}
  ep-b: {input_per_million_usd: 0.2, cached_input_per_million_usd: 0.02, output_per_million_usd: 1.2}
trial_budget:
  timeout_seconds: 600
`

// mutate applies old→new replacements to the base manifest; each old must occur.
func mutate(t *testing.T, pairs ...string) string {
	t.Helper()
	doc := baseManifest
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(doc, pairs[i]) {
			t.Fatalf("base manifest has no %q", pairs[i])
		}
		doc = strings.Replace(doc, pairs[i], pairs[i+1], 1)
	}
	return doc
}

func TestParseBase(t *testing.T) {
	m, err := Parse("base.yaml", []byte(baseManifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.Condition != "base" || len(m.Roster) != 2 || m.Agents() != 3 || m.IsSolo() {
		t.Fatalf("unexpected manifest %+v", m)
	}
	w := m.Roster[1]
	if w.Harness != BuzzAgent || !w.IncludePlatformPrompt || w.Concurrency != 1 || *w.Generation.MaxOutputTokens != 4096 {
		t.Errorf("defaults not applied: %+v", w)
	}
	if m.Prices["ep-a"].InputPerMillionUSD != 5 || m.TrialBudget.TimeoutSeconds != 600 || m.AgentUser != Isolated {
		t.Errorf("values not decoded: %+v", m)
	}
	if len(m.Hash()) != 64 {
		t.Errorf("hash %q", m.Hash())
	}
}

func TestParseRules(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		path string // key path of the error
		want string // part of the message
	}{
		{"unknown root key", mutate(t, "condition: base", "condition: base\ncondtion: x"), "condtion", `did you mean "condition"`},
		{"misspelt class key", mutate(t, "model_revision: rev-a", "modelrevision: rev-a"), "roster[0].modelrevision", `did you mean "model_revision"`},
		{"temperature refused", mutate(t, "{max_output_tokens: 4096,", "{temperature: 0.2, max_output_tokens: 4096,"), "roster[1].generation.temperature", "no temperature"},
		{"schema_version an int", mutate(t, `schema_version: "1"`, "schema_version: 1"), "schema_version", `the string "1"`},
		{"schema_version 2", mutate(t, `schema_version: "1"`, `schema_version: "2"`), "schema_version", `must be "1"`},
		{"condition missing", mutate(t, "condition: base\n", ""), "", `missing required key "condition"`},
		{"condition empty", mutate(t, "condition: base", `condition: ""`), "condition", "must not be empty"},
		{"condition a number", mutate(t, "condition: base", "condition: 12"), "condition", "must be a string"},
		{"roster empty", "condition: c\nroster: []\nprices: {}\ntrial_budget: {timeout_seconds: 1}\n", "roster", "at least one"},
		{"roster a mapping", "condition: c\nroster: {a: 1}\nprices: {}\ntrial_budget: {timeout_seconds: 1}\n", "roster", "must be a list"},
		{"id pattern", mutate(t, "id: orch", "id: Orch"), "roster[0].id", "lower-case"},
		{"id leading dash", mutate(t, "id: orch", "id: -orch"), "roster[0].id", "lower-case"},
		{"kind unknown", mutate(t, "kind: worker", "kind: boss"), "roster[1].kind", "must be one of orchestrator, worker"},
		{"role empty", mutate(t, "role: lead", `role: ""`), "roster[0].role", "must not be empty"},
		{"role a YAML 1.1 boolean", mutate(t, "role: lead", "role: yes"), "roster[0].role", `write "yes" in quotes`},
		{"count zero", mutate(t, "count: 2", "count: 0"), "roster[1].count", "greater than 0"},
		{"count fractional", mutate(t, "count: 2", "count: 1.5"), "roster[1].count", "whole number"},
		{"count huge", mutate(t, "count: 2", "count: 100000"), "roster[1].count", "more agents than troupe runs"},
		{"concurrency above count", mutate(t, "count: 2", "count: 2\n    concurrency: 3"), "roster[1].concurrency", "concurrency cannot exceed count (3 > 2)"},
		{"concurrency zero", mutate(t, "count: 2", "count: 2\n    concurrency: 0"), "roster[1].concurrency", "greater than 0"},
		{"harness not a name", mutate(t, "count: 2", "count: 2\n    harness: Claude Code"), "roster[1].harness", "must name a stack: buzz-agent, goose, codex"},
		{"prompt missing", mutate(t, "    prompt: {path: lead.md, sha256: "+pin+"}\n", ""), "roster[0]", `missing required key "prompt"`},
		{"prompt sha256 malformed", mutate(t, "{path: lead.md, sha256: "+pin, "{path: lead.md, sha256: ABC"), "roster[0].prompt.sha256", "64 lower-case hex"},
		{"prompt path empty", mutate(t, "{path: lead.md,", `{path: "",`), "roster[0].prompt.path", "must not be empty"},
		{"prompt key unknown", mutate(t, "{path: lead.md,", "{file: lead.md,"), "roster[0].prompt.file", "unknown key"},
		{"persona a string", mutate(t, "count: 2", "count: 2\n    persona: lead.md"), "roster[1].persona", "must be a mapping"},
		{"skills a mapping", mutate(t, "count: 2", "count: 2\n    skills: {path: a}"), "roster[1].skills", "must be a list"},
		{"skill sha256 missing", mutate(t, "count: 2", "count: 2\n    skills: [{path: a.md}]"), "roster[1].skills[0]", `missing required key "sha256"`},
		{"include_platform_prompt not a bool", mutate(t, "count: 2", "count: 2\n    include_platform_prompt: maybe"), "roster[1].include_platform_prompt", "true or false"},
		{"generation empty", mutate(t, "count: 1", "count: 1\n    generation:"), "roster[0].generation", "is empty"},
		{"max_output_tokens zero", mutate(t, "max_output_tokens: 4096", "max_output_tokens: 0"), "roster[1].generation.max_output_tokens", "greater than 0"},
		{"compact_at_percent above 100", mutate(t, "context_window_tokens: 128000", "context_window_tokens: 128000, compact_at_percent: 101"), "roster[1].generation.compact_at_percent", "between 1 and 100"},
		{"thinking_effort unknown", mutate(t, "context_window_tokens: 128000", "context_window_tokens: 128000, thinking_effort: extreme"), "roster[1].generation.thinking_effort", "none, minimal, low, medium, high, xhigh, max"},
		{"max_output_tokens not below the window", mutate(t, "max_output_tokens: 4096", "max_output_tokens: 128000"), "roster[1].generation.max_output_tokens", "must be less than context_window_tokens 128000"},
		{"compact_at_tokens beyond the window", mutate(t, "context_window_tokens: 128000", "context_window_tokens: 128000, compact_at_tokens: 124000"), "roster[1].generation.compact_at_tokens", "exceeds the window minus max_output_tokens (123904)"},
		{"goose_system_prompt_mode", mutate(t, "context_window_tokens: 128000", "context_window_tokens: 128000, extra: {goose_system_prompt_mode: replace}"), "roster[1].generation.extra.goose_system_prompt_mode", "must be append or set"},
		{"budget max_calls negative", mutate(t, "count: 2", "count: 2\n    budget: {max_calls: -1}"), "roster[1].budget.max_calls", "greater than 0"},
		{"budget max_cost_usd zero", mutate(t, "count: 2", "count: 2\n    budget: {max_cost_usd: 0}"), "roster[1].budget.max_cost_usd", "greater than 0"},
		{"budget unknown key", mutate(t, "count: 2", "count: 2\n    budget: {max_turns: 3}"), "roster[1].budget.max_turns", "unknown key"},
		{"endpoint unpriced", mutate(t, "endpoint: ep-b", "endpoint: ep-c"), "roster[1].endpoint", `prices missing for endpoint "ep-c"`},
		{"price negative", mutate(t, "output_per_million_usd: 25", "output_per_million_usd: -25"), `prices["ep-a"].output_per_million_usd`, "zero or more"},
		{"cache_read_rate above 1", mutate(t, "output_per_million_usd: 25}", "output_per_million_usd: 25, cache_read_rate: 1.5}"), `prices["ep-a"].cache_read_rate`, "between 0 and 1"},
		{"price field missing", mutate(t, ", output_per_million_usd: 25", ""), `prices["ep-a"]`, `missing required key "output_per_million_usd"`},
		{"price with a unit", mutate(t, "output_per_million_usd: 25", "output_per_million_usd: 25 USD"), `prices["ep-a"].output_per_million_usd`, "must be a number"},
		{"trial_budget missing", mutate(t, "trial_budget:\n  timeout_seconds: 600\n", ""), "", `missing required key "trial_budget"`},
		{"timeout_seconds zero", mutate(t, "timeout_seconds: 600", "timeout_seconds: 0"), "trial_budget.timeout_seconds", "greater than 0"},
		{"trial max_cost_usd negative", mutate(t, "timeout_seconds: 600", "timeout_seconds: 600\n  max_cost_usd: -1"), "trial_budget.max_cost_usd", "greater than 0"},
		{"override_gpus refused", mutate(t, "trial_budget:", "environment: {override_gpus: 1}\ntrial_budget:"), "environment.override_gpus", "GPU overrides are not supported"},
		{"override_cpus zero", mutate(t, "trial_budget:", "environment: {override_cpus: 0}\ntrial_budget:"), "environment.override_cpus", "greater than 0"},
		{"duplicate class id", mutate(t, "id: worker", "id: orch"), "roster[1].id", "already used by roster[0]"},
		{"no orchestrator", mutate(t, "kind: orchestrator", "kind: worker"), "roster", "no class has kind: orchestrator"},
		{"two orchestrator classes", mutate(t, "kind: worker", "kind: orchestrator"), "roster", "add up to 3 agents"},
		{"orchestrator count 2", mutate(t, "count: 1", "count: 2"), "roster", "add up to 2 agents: orch (count 2)"},
		{"metadata a list", mutate(t, "trial_budget:", "metadata: [a]\ntrial_budget:"), "metadata", "must be a mapping"},
		{"metadata timestamp", mutate(t, "trial_budget:", "metadata: {day: 2026-11-30}\ntrial_budget:"), "metadata.day", "quote it"},
		{"metadata integer key", mutate(t, "trial_budget:", "metadata: {1: one}\ntrial_budget:"), "metadata", "not as a name"},
		{"metadata infinity", mutate(t, "trial_budget:", "metadata: {x: .inf}\ntrial_budget:"), "metadata.x", "finite"},
		{"agent_user unknown", mutate(t, "trial_budget:", "agent_user: nobody\ntrial_budget:"), "agent_user", "isolated, root"},
		{"root a list", "- a\n- b\n", "", "must be a mapping"},
		{"empty file", "", "", "must be a mapping"},
		{"syntax error", "condition: [a\n", "", "YAML syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("m.yaml", []byte(tt.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			errs, ok := errors.AsType[located.List](err)
			if !ok {
				t.Fatalf("error is %T, not a located.List: %v", err, err)
			}
			var found *located.Error
			for _, e := range errs {
				if e.Path == tt.path && strings.Contains(e.Err.Error(), tt.want) {
					found = e
				}
			}
			if found == nil {
				t.Fatalf("no error at %q saying %q; got:\n%v", tt.path, tt.want, err)
			}
			if found.File != "m.yaml" || found.Line < 1 || found.Col < 1 {
				t.Errorf("error not located: %+v", found)
			}
		})
	}
}

func TestParseReportsEveryProblemAtOnce(t *testing.T) {
	doc := mutate(t,
		`schema_version: "1"`, "schema_version: 1",
		"kind: worker", "kind: boss",
		"count: 2", "count: 0",
		"output_per_million_usd: 25", "output_per_million_usd: -1",
		"timeout_seconds: 600", "timeout_seconds: soon",
	)
	_, err := Parse("five.yaml", []byte(doc))
	errs, ok := errors.AsType[located.List](err)
	if !ok {
		t.Fatalf("got %v", err)
	}
	if len(errs) != 5 {
		t.Fatalf("want 5 errors, got %d:\n%v", len(errs), err)
	}
	for i := 1; i < len(errs); i++ {
		if errs[i].Line < errs[i-1].Line {
			t.Errorf("errors not in file order:\n%v", err)
		}
	}
	if !strings.HasPrefix(errs[0].Error(), "five.yaml:1:17: schema_version: ") {
		t.Errorf("first error not formatted as file:line:col: path: message: %q", errs[0].Error())
	}
}

func TestParseCompatibility(t *testing.T) {
	// Forms the original accepted that a strict reader might not.
	m, err := Parse("c.yaml", []byte(mutate(t,
		"timeout_seconds: 600", "timeout_seconds: \"600\"\n  max_cost_usd: 1e-06",
		`schema_version: "1"`+"\n", "",
		"count: 2", "count: 2\n    persona: null\n    generation: {thinking_effort: ~}",
		"    generation: {max_output_tokens: 4096, context_window_tokens: 128000}\n", "",
	)))
	if err != nil {
		t.Fatal(err)
	}
	if m.TrialBudget.TimeoutSeconds != 600 || *m.TrialBudget.MaxCostUSD != 1e-06 || m.SchemaVersion != "1" {
		t.Errorf("numeric strings not read as numbers: %+v", m.TrialBudget)
	}
	if m.Roster[1].Persona != nil || m.Roster[1].Generation.ThinkingEffort != "" {
		t.Errorf("explicit nulls not read as unset: %+v", m.Roster[1])
	}
}

func TestTroupeAdditionsLeaveHashesAlone(t *testing.T) {
	base, err := Parse("a.yaml", []byte(baseManifest))
	if err != nil {
		t.Fatal(err)
	}
	explicitDefault, err := Parse("b.yaml", []byte(mutate(t, "trial_budget:", "agent_user: isolated\nenvironment: {override_pids: null}\ntrial_budget:")))
	if err != nil {
		t.Fatal(err)
	}
	if base.Hash() != explicitDefault.Hash() {
		t.Errorf("agent_user: isolated or override_pids: null changed the hash")
	}
	root, err := Parse("c.yaml", []byte(mutate(t, "trial_budget:", "agent_user: root\ntrial_budget:")))
	if err != nil {
		t.Fatal(err)
	}
	pids, err := Parse("d.yaml", []byte(mutate(t, "trial_budget:", "environment: {override_pids: 512}\ntrial_budget:")))
	if err != nil {
		t.Fatal(err)
	}
	if root.Hash() == base.Hash() || pids.Hash() == base.Hash() || root.AgentUser != Root || *pids.Environment.OverridePids != 512 {
		t.Errorf("a set troupe addition must change the condition")
	}
}

func TestLoadRefusesLargeFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte("condition: x\n"+strings.Repeat("# padding\n", MaxSize/10+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "larger than") || !strings.HasPrefix(err.Error(), path) {
		t.Fatalf("got %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing file: %v", err)
	}
}

// FuzzParse starts from real manifests of 0.3 to 1.9 KB. Go minimizes each
// input that finds new coverage before it counts any of the runs spent on it,
// trying about n²/2 shorter candidates for n bytes: some 400,000 runs of
// Parse for a 900-byte input, more than the default -fuzzminimizetime of 60s.
// A short run then shows "execs: N (0/sec)" while its workers are busy
// minimizing; pass -fuzzminimizetime=2s to keep them fuzzing.
func FuzzParse(f *testing.F) {
	f.Add([]byte(baseManifest))
	for _, file := range mustGlob(f, "testdata/hash/*.yaml") {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("roster: [{id: a, kind: orchestrator, count: 1}]\nprices: {}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse("fuzz.yaml", data)
		if err != nil {
			errs, ok := errors.AsType[located.List](err)
			if !ok || len(errs) == 0 {
				t.Fatalf("error is not a list of located errors: %#v", err)
			}
			for _, e := range errs {
				if e.Line < 1 || e.Col < 1 || e.File != "fuzz.yaml" {
					t.Fatalf("unlocated error: %v", e)
				}
			}
			return
		}
		if len(m.Hash()) != 64 || m.Agents() < 1 || m.Agents() > MaxAgents {
			t.Fatalf("accepted an invalid manifest: %d agents, hash %q", m.Agents(), m.Hash())
		}
		again, err := Parse("fuzz.yaml", data)
		if err != nil || again.Hash() != m.Hash() {
			t.Fatalf("hash is not deterministic: %v", err)
		}
	})
}

func mustGlob(tb testing.TB, pattern string) []string {
	tb.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		tb.Fatalf("%s: %v", pattern, err)
	}
	return files
}

func ExampleParse() {
	m, err := Parse("solo.yaml", []byte(`condition: solo
roster:
  - {id: solo, kind: orchestrator, role: solo, count: 1, endpoint: mock/hello-solo,
     model_revision: mock, prompt: {path: "troupe:solo", sha256: `+pin+`}}
prices: {mock/hello-solo: {input_per_million_usd: 0, cached_input_per_million_usd: 0, output_per_million_usd: 0}}
trial_budget: {timeout_seconds: 300}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Condition, m.Agents(), m.Hash()[:12])
	// Output: solo 1 e9ce4c14a858
}
