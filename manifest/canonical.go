package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pyFloat marks a value the original held as a Python float, so it prints
// the way Python's repr prints floats (5.0, 1e-06), not as Go would.
type pyFloat float64

// canonicalJSON renders the manifest exactly as the original system did
// before hashing: the full model with every default and null, keys sorted,
// compact, raw UTF-8. Two fields are dropped so that older manifests keep
// their hash: harness when it is buzz-agent, and an unset
// generation.thinking_effort. troupe's own additions appear only when set.
func canonicalJSON(m *Manifest) []byte {
	roster := make([]any, len(m.Roster))
	for i, c := range m.Roster {
		roster[i] = canonicalClass(c)
	}
	prices := make(map[string]any, len(m.Prices))
	for name, p := range m.Prices {
		prices[name] = map[string]any{
			"input_per_million_usd":        pyFloat(p.InputPerMillionUSD),
			"cached_input_per_million_usd": pyFloat(p.CachedInputPerMillionUSD),
			"output_per_million_usd":       pyFloat(p.OutputPerMillionUSD),
			"cache_read_rate":              pyFloat(p.CacheReadRate),
		}
	}
	env := map[string]any{
		"override_cpus":       optInt(m.Environment.OverrideCPUs),
		"override_memory_mb":  optInt(m.Environment.OverrideMemoryMB),
		"override_storage_mb": optInt(m.Environment.OverrideStorageMB),
	}
	if m.Environment.OverridePids != nil {
		env["override_pids"] = *m.Environment.OverridePids
	}
	doc := map[string]any{
		"schema_version": m.SchemaVersion,
		"condition":      m.Condition,
		"roster":         roster,
		"prices":         prices,
		"trial_budget": map[string]any{
			"timeout_seconds": m.TrialBudget.TimeoutSeconds,
			"max_cost_usd":    optFloat(m.TrialBudget.MaxCostUSD),
		},
		"environment": env,
		"metadata":    m.Metadata,
	}
	if m.AgentUser != Isolated {
		doc["agent_user"] = string(m.AgentUser)
	}
	return appendCanonical(nil, doc)
}

func canonicalClass(c AgentClass) map[string]any {
	skills := make([]any, len(c.Skills))
	for i, s := range c.Skills {
		skills[i] = canonicalRef(s)
	}
	var persona any
	if c.Persona != nil {
		persona = canonicalRef(*c.Persona)
	}
	gen := map[string]any{
		"max_output_tokens":     optInt(c.Generation.MaxOutputTokens),
		"context_window_tokens": optInt(c.Generation.ContextWindowTokens),
		"compact_at_percent":    optInt(c.Generation.CompactAtPercent),
		"compact_at_tokens":     optInt(c.Generation.CompactAtTokens),
		"extra":                 c.Generation.Extra,
	}
	if c.Generation.ThinkingEffort != "" {
		gen["thinking_effort"] = c.Generation.ThinkingEffort
	}
	out := map[string]any{
		"id":                      c.ID,
		"kind":                    string(c.Kind),
		"role":                    c.Role,
		"count":                   c.Count,
		"endpoint":                c.Endpoint,
		"model_revision":          c.ModelRevision,
		"prompt":                  canonicalRef(c.Prompt),
		"persona":                 persona,
		"skills":                  skills,
		"include_platform_prompt": c.IncludePlatformPrompt,
		"generation":              gen,
		"budget": map[string]any{
			"max_calls":         optInt(c.Budget.MaxCalls),
			"max_input_tokens":  optInt(c.Budget.MaxInputTokens),
			"max_output_tokens": optInt(c.Budget.MaxOutputTokens),
			"max_cost_usd":      optFloat(c.Budget.MaxCostUSD),
		},
		"concurrency": c.Concurrency,
	}
	if c.Harness != BuzzAgent {
		out["harness"] = string(c.Harness)
	}
	return out
}

func canonicalRef(r ArtifactRef) map[string]any {
	return map[string]any{"path": r.Path, "sha256": r.SHA256}
}

func optInt(v *int64) any {
	if v == nil {
		return nil
	}
	return *v
}

func optFloat(v *float64) any {
	if v == nil {
		return nil
	}
	return pyFloat(*v)
}

// appendCanonical writes v as Python's json.dumps(v, sort_keys=True,
// separators=(",", ":"), ensure_ascii=False, allow_nan=False) would. Free-form
// float64 values are Python floats too. The manifest was validated, so every
// float is finite and every string valid UTF-8.
func appendCanonical(buf []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		return strconv.AppendBool(buf, v)
	case string:
		return appendPyString(buf, v)
	case int:
		return strconv.AppendInt(buf, int64(v), 10)
	case int64:
		return strconv.AppendInt(buf, v, 10)
	case json.Number:
		return append(buf, v...)
	case pyFloat:
		return append(buf, formatPyFloat(float64(v))...)
	case float64:
		return append(buf, formatPyFloat(v)...)
	case []any:
		buf = append(buf, '[')
		for i, item := range v {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendCanonical(buf, item)
		}
		return append(buf, ']')
	case map[string]any:
		buf = append(buf, '{')
		// Byte order of UTF-8 is code point order, which is Python's str order.
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendPyString(buf, k)
			buf = append(buf, ':')
			buf = appendCanonical(buf, v[k])
		}
		return append(buf, '}')
	}
	panic(fmt.Sprintf("manifest: no canonical form for %T", v))
}

// formatPyFloat prints a finite float as Python's repr does: the shortest
// digits that round-trip, positional for 1e-4 <= |x| < 1e16 (always with a
// dot: 5.0), scientific otherwise with at least two exponent digits (1e-06,
// 1e+16).
func formatPyFloat(x float64) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		panic("manifest: non-finite float reached the canonical form")
	}
	if abs := math.Abs(x); x == 0 || (abs >= 1e-4 && abs < 1e16) {
		s := strconv.FormatFloat(x, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	return strconv.FormatFloat(x, 'e', -1, 64)
}

// appendPyString quotes s as Python's json module does with
// ensure_ascii=False: only the quote, the backslash and control characters
// are escaped; everything else, U+2028 included, is written raw.
func appendPyString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			_, size := utf8.DecodeRuneInString(s[i:])
			buf = append(buf, s[i:i+size]...)
			i += size
			continue
		}
		switch c {
		case '"':
			buf = append(buf, `\"`...)
		case '\\':
			buf = append(buf, `\\`...)
		case '\n':
			buf = append(buf, `\n`...)
		case '\r':
			buf = append(buf, `\r`...)
		case '\t':
			buf = append(buf, `\t`...)
		case '\b':
			buf = append(buf, `\b`...)
		case '\f':
			buf = append(buf, `\f`...)
		default:
			buf = fmt.Appendf(buf, `\u%04x`, c)
		}
		i++
	}
	return append(buf, '"')
}
