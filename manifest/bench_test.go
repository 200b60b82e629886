package manifest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	goyaml "github.com/goccy/go-yaml"
)

// manifest100 is a 100-agent manifest: one orchestrator and 99 worker classes,
// every class with generation, budget, persona and skills set, 100 priced
// endpoints, and metadata.
func manifest100() []byte {
	var b strings.Builder
	b.WriteString("schema_version: \"1\"\ncondition: bench-100\nroster:\n")
	for i := range 100 {
		kind := "worker"
		if i == 0 {
			kind = "orchestrator"
		}
		fmt.Fprintf(&b, `  - id: agent%03d
    kind: %s
    role: role-%d
    count: 1
    endpoint: provider/model-%d
    model_revision: model-%d-2026-11
    harness: buzz-agent
    prompt: {path: personas/p%d.md, sha256: %s}
    persona: {path: personas/persona.md, sha256: %s}
    skills:
      - {path: skills/a.md, sha256: %s}
    generation:
      max_output_tokens: 4096
      context_window_tokens: 128000
      compact_at_percent: 90
      thinking_effort: high
      extra: {goose_system_prompt_mode: append, note: "agent %d"}
    budget: {max_calls: 200, max_input_tokens: 2_000_000, max_output_tokens: 200000, max_cost_usd: 2.5}
    concurrency: 1
`, i, kind, i%7, i, i, i, pin, pin, pin, i)
	}
	b.WriteString("prices:\n")
	for i := range 100 {
		fmt.Fprintf(&b, "  provider/model-%d: {input_per_million_usd: %d.5, cached_input_per_million_usd: 0.25, output_per_million_usd: 15, cache_read_rate: 0.1}\n", i, i)
	}
	b.WriteString("trial_budget: {timeout_seconds: 36000, max_cost_usd: 100}\nenvironment: {override_cpus: 4, override_memory_mb: 8192}\nmetadata: {owner: bench, tags: [a, b, c]}\n")
	return []byte(b.String())
}

func TestManifest100IsValid(t *testing.T) {
	m, err := Parse("bench.yaml", manifest100())
	if err != nil {
		t.Fatal(err)
	}
	if m.Agents() != 100 {
		t.Fatalf("%d agents", m.Agents())
	}
}

// BenchmarkManifest100 measures load + validate + hash of a 100-agent
// manifest ("troupe") beside a baseline from the same run: decoding the same
// bytes with goccy/go-yaml into a map, encoding/json and sha256 — a loader
// with no validation, no locations and no PyYAML compatibility.
func BenchmarkManifest100(b *testing.B) {
	data := manifest100()
	b.Run("baseline", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var v map[string]any
			if err := goyaml.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
			out, err := json.Marshal(v)
			if err != nil {
				b.Fatal(err)
			}
			sha256.Sum256(out)
		}
	})
	b.Run("troupe", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			m, err := Parse("bench.yaml", data)
			if err != nil {
				b.Fatal(err)
			}
			_ = m.Hash()
		}
	})
}
