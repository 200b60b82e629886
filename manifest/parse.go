package manifest

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/yaml11"
)

// Limits on a manifest. The original set none; these keep a hostile or
// mistaken file from costing more than a moment.
const (
	// MaxSize is the largest manifest file read.
	MaxSize = 1 << 20
	// MaxAgents bounds the agents of one trial.
	MaxAgents = 1000
)

var (
	idPattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

var thinkingEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// Load reads and parses the manifest at path.
func Load(path string) (*Manifest, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, located.List{{File: path, Err: err}}
	}
	return Parse(path, data)
}

// ReadFile reads a manifest file, refusing one over MaxSize without reading
// it all.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAtMost(f, MaxSize, "this is not a file troupe reads")
}

// readAtMost reads r to its end, or fails once it holds more than limit
// bytes; why says what the limit protects.
func readAtMost(r io.Reader, limit int64, why string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes; %s", limit, why)
	}
	return data, nil
}

// Parse decodes and validates a manifest. file labels errors. On failure the
// error is a located.List holding every problem found, each located.
func Parse(file string, data []byte) (*Manifest, error) {
	if len(data) > MaxSize {
		return nil, located.List{{File: file, Err: fmt.Errorf("larger than %d bytes; this is not a file troupe reads", MaxSize)}}
	}
	root, err := yaml11.Parse(file, data)
	if err != nil {
		if e, ok := err.(*located.Error); ok {
			return nil, located.List{e}
		}
		return nil, located.List{{File: file, Err: err}}
	}
	p := &parser{d: yaml11.Decoder{File: file, NumericStrings: true}}
	m := p.manifest(root)
	if err := p.d.Err(); err != nil {
		return nil, err
	}
	m.file = file
	m.canonical = canonicalJSON(m)
	sum := sha256.Sum256(m.canonical)
	m.hash = hex.EncodeToString(sum[:])
	return m, nil
}

// harnessName is a stack's name (package stack): the original's three
// harnesses, or any stack troupe is given.
var harnessName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// parser holds the decoder and what the root checks need to know about each
// roster class beyond its decoded value.
type parser struct {
	d       yaml11.Decoder
	classes []classSeen
}

// classSeen records where a roster class's checked fields are written, and
// which of them decoded cleanly, for the checks across the roster.
type classSeen struct {
	index              int
	node               *yaml11.Node
	id, kind, endpoint *yaml11.Node
	countOK            bool
}

func (p *parser) manifest(root *yaml11.Node) *Manifest {
	d := &p.d
	m := &Manifest{
		SchemaVersion: "1",
		Prices:        map[string]Price{},
		Metadata:      map[string]any{},
		AgentUser:     Isolated,
	}
	if root.Kind != yaml11.Map {
		d.Errorf(root, "", "the manifest must be a mapping with keys schema_version, condition, roster, prices and trial_budget; found %s", root.Kind)
		return m
	}
	var rosterNode *yaml11.Node
	d.Struct(root, "", []yaml11.Field{
		{Name: "schema_version", Decode: func(n *yaml11.Node, path string) {
			if n.Kind == yaml11.String && n.Text == "1" {
				return
			}
			if n.Kind == yaml11.Int && n.Int.String() == "1" {
				d.Errorf(n, path, `must be the string "1"; write schema_version: "1" with quotes`)
				return
			}
			d.Errorf(n, path, `must be "1", the only schema version there is; found %s`, n.Text)
		}},
		{Name: "condition", Required: true, Decode: func(n *yaml11.Node, path string) {
			m.Condition, _ = p.nonEmpty(n, path)
		}},
		{Name: "roster", Required: true, Decode: func(n *yaml11.Node, path string) {
			rosterNode = n
			d.Seq(n, path, func(item *yaml11.Node, path string) {
				m.Roster = append(m.Roster, p.class(item, path, len(m.Roster)))
			})
			if n.Kind == yaml11.Seq && len(n.Items) == 0 {
				d.Errorf(n, path, "must list at least one agent class (the orchestrator)")
			}
		}},
		{Name: "prices", Required: true, Decode: func(n *yaml11.Node, path string) {
			d.Map(n, path, func(endpoint string, _, v *yaml11.Node, path string) {
				m.Prices[endpoint] = p.price(v, path)
			})
		}},
		{Name: "trial_budget", Required: true, Decode: func(n *yaml11.Node, path string) {
			m.TrialBudget = p.trialBudget(n, path)
		}},
		{Name: "environment", Decode: func(n *yaml11.Node, path string) {
			m.Environment = p.environment(n, path)
		}},
		{Name: "metadata", Decode: func(n *yaml11.Node, path string) {
			if p.mapping(n, path) {
				v, _ := d.Any(n, path)
				m.Metadata, _ = v.(map[string]any)
			}
		}},
		{Name: "agent_user", Decode: func(n *yaml11.Node, path string) {
			if s, ok := p.oneOf(n, path, string(Isolated), string(Root)); ok {
				m.AgentUser = AgentUser(s)
			}
		}},
	}, nil)
	if rosterNode != nil && rosterNode.Kind == yaml11.Seq && len(rosterNode.Items) > 0 {
		p.checkRoster(m, rosterNode)
	}
	return m
}

// checkRoster runs the checks across classes, in the original's order:
// unique ids, exactly one orchestrator, every endpoint priced; then troupe's
// bound on the number of agents.
func (p *parser) checkRoster(m *Manifest, rosterNode *yaml11.Node) {
	d := &p.d
	firstUse := map[string]int{}
	for _, c := range p.classes {
		if c.id == nil {
			continue
		}
		id := m.Roster[c.index].ID
		if prev, ok := firstUse[id]; ok {
			d.Errorf(c.id, yaml11.Key(yaml11.Index("roster", c.index), "id"), "roster class id %q is already used by roster[%d]; class ids must be unique", id, prev)
			continue
		}
		firstUse[id] = c.index
	}

	orchestrators, allKnown := []string{}, true
	total := 0
	for _, c := range p.classes {
		cls := m.Roster[c.index]
		if c.kind == nil || !c.countOK {
			allKnown = false
			continue
		}
		total += cls.Count
		if cls.Kind == Orchestrator {
			orchestrators = append(orchestrators, fmt.Sprintf("%s (count %d)", cmp.Or(cls.ID, fmt.Sprintf("roster[%d]", c.index)), cls.Count))
		}
	}
	if allKnown {
		sum := 0
		for _, c := range m.Roster {
			if c.Kind == Orchestrator {
				sum += c.Count
			}
		}
		switch {
		case sum == 0:
			d.Errorf(rosterNode, "roster", "roster must contain exactly one orchestrator; no class has kind: orchestrator (a solo roster is one class with kind: orchestrator and count: 1)")
		case sum > 1:
			d.Errorf(rosterNode, "roster", "roster must contain exactly one orchestrator; the orchestrator classes add up to %d agents: %s", sum, strings.Join(orchestrators, ", "))
		}
		if total > MaxAgents {
			d.Errorf(rosterNode, "roster", "the roster expands to %d agents; troupe runs at most %d per trial", total, MaxAgents)
		}
	}

	for _, c := range p.classes {
		ep := m.Roster[c.index].Endpoint
		if c.endpoint == nil || ep == "" {
			continue
		}
		if _, ok := m.Prices[ep]; !ok {
			d.Errorf(c.endpoint, yaml11.Key(yaml11.Index("roster", c.index), "endpoint"),
				"prices missing for endpoint %q; add it under prices: with input_per_million_usd, cached_input_per_million_usd and output_per_million_usd", ep)
		}
	}
}

func (p *parser) class(n *yaml11.Node, path string, index int) AgentClass {
	c := AgentClass{Harness: BuzzAgent, IncludePlatformPrompt: true, Concurrency: 1, Skills: []ArtifactRef{}}
	c.Generation.Extra = map[string]any{}
	seen := classSeen{index: index, node: n}
	concurrencyNode := (*yaml11.Node)(nil)
	fields := append(p.classIdentity(&c, &seen), p.classWork(&c, &concurrencyNode)...)
	ok := p.d.Struct(n, path, fields, map[string]string{
		"temperature": "the original schema has no temperature and troupe keeps it that way; set generation options under generation:",
	})
	if !ok {
		return c
	}
	if concurrencyNode != nil && seen.countOK && c.Concurrency > c.Count {
		p.d.Errorf(concurrencyNode, yaml11.Key(path, "concurrency"), "concurrency cannot exceed count (%d > %d)", c.Concurrency, c.Count)
	}
	p.classes = append(p.classes, seen)
	return c
}

// classIdentity is the keys of a roster class that say who its agents are:
// id, kind, role, count, endpoint, model_revision and harness.
func (p *parser) classIdentity(c *AgentClass, seen *classSeen) []yaml11.Field {
	d := &p.d
	return []yaml11.Field{
		{Name: "id", Required: true, Decode: func(n *yaml11.Node, path string) {
			s, ok := d.String(n, path)
			if !ok {
				return
			}
			if !idPattern.MatchString(s) {
				d.Errorf(n, path, "id %q must be lower-case letters, digits, '.', '_' or '-', starting with a letter or digit (agents are named <id>-1, <id>-2, ...)", s)
				return
			}
			c.ID, seen.id = s, n
		}},
		{Name: "kind", Required: true, Decode: func(n *yaml11.Node, path string) {
			if s, ok := p.oneOf(n, path, string(Orchestrator), string(Worker)); ok {
				c.Kind, seen.kind = Kind(s), n
			}
		}},
		{Name: "role", Required: true, Decode: func(n *yaml11.Node, path string) {
			c.Role, _ = p.nonEmpty(n, path)
		}},
		{Name: "count", Required: true, Decode: func(n *yaml11.Node, path string) {
			if v, ok := p.positiveInt(n, path); ok {
				if v > MaxAgents {
					d.Errorf(n, path, "count %d is more agents than troupe runs in one trial (%d)", v, MaxAgents)
					return
				}
				c.Count, seen.countOK = int(v), true
			}
		}},
		{Name: "endpoint", Required: true, Decode: func(n *yaml11.Node, path string) {
			if s, ok := p.nonEmpty(n, path); ok {
				c.Endpoint, seen.endpoint = s, n
			}
		}},
		{Name: "model_revision", Required: true, Decode: func(n *yaml11.Node, path string) {
			c.ModelRevision, _ = d.String(n, path)
		}},
		{Name: "harness", Decode: func(n *yaml11.Node, path string) {
			s, ok := p.d.String(n, path)
			switch {
			case !ok:
			case !harnessName.MatchString(s):
				p.d.Errorf(n, path, "must name a stack: %s, %s, %s (the original's), or a stack troupe's config or stacks.yaml defines (lower-case letters, digits, '.', '_', '-'); found %q", BuzzAgent, Goose, Codex, s)
			default:
				c.Harness = Harness(s)
			}
		}},
	}
}

// classWork is the keys of a roster class that say what its agents work
// with: their pinned prompt, persona and skills, the platform prompt,
// generation settings, budget and concurrency (its node goes to
// concurrencyNode, for the check against count).
func (p *parser) classWork(c *AgentClass, concurrencyNode **yaml11.Node) []yaml11.Field {
	d := &p.d
	return []yaml11.Field{
		{Name: "prompt", Required: true, Decode: func(n *yaml11.Node, path string) {
			c.Prompt = p.artifact(n, path)
		}},
		{Name: "persona", Decode: func(n *yaml11.Node, path string) {
			if yaml11.IsNull(n) {
				return
			}
			ref := p.artifact(n, path)
			c.Persona = &ref
		}},
		{Name: "skills", Decode: func(n *yaml11.Node, path string) {
			d.Seq(n, path, func(item *yaml11.Node, path string) {
				c.Skills = append(c.Skills, p.artifact(item, path))
			})
		}},
		{Name: "include_platform_prompt", Decode: func(n *yaml11.Node, path string) {
			c.IncludePlatformPrompt, _ = d.Bool(n, path)
		}},
		{Name: "generation", Decode: func(n *yaml11.Node, path string) {
			c.Generation = p.generation(n, path)
		}},
		{Name: "budget", Decode: func(n *yaml11.Node, path string) {
			c.Budget = p.budget(n, path)
		}},
		{Name: "concurrency", Decode: func(n *yaml11.Node, path string) {
			if v, ok := p.positiveInt(n, path); ok {
				c.Concurrency, *concurrencyNode = int(v), n
			}
		}},
	}
}

func (p *parser) artifact(n *yaml11.Node, path string) ArtifactRef {
	d := &p.d
	ref := ArtifactRef{at: place{key: path}}
	d.Struct(n, path, []yaml11.Field{
		{Name: "path", Required: true, Decode: func(n *yaml11.Node, path string) {
			ref.Path, _ = p.nonEmpty(n, path)
			ref.at.path = n
		}},
		{Name: "sha256", Required: true, Decode: func(n *yaml11.Node, path string) {
			ref.at.hash = n
			s, ok := d.String(n, path)
			if !ok {
				return
			}
			if !sha256Pattern.MatchString(s) {
				d.Errorf(n, path, "must be 64 lower-case hex digits, the SHA-256 of the file; run troupe pin to fill it in")
				return
			}
			ref.SHA256 = s
		}},
	}, nil)
	return ref
}

func (p *parser) generation(n *yaml11.Node, path string) Generation {
	d := &p.d
	g := Generation{Extra: map[string]any{}}
	if !p.mapping(n, path) {
		return g
	}
	places := map[string]*yaml11.Node{}
	optInt := func(dst **int64, lo, hi int64) func(*yaml11.Node, string) {
		return func(n *yaml11.Node, path string) {
			if v, ok := p.optionalInt(n, path, lo, hi); ok {
				*dst = v
				if v != nil {
					places[path] = n
				}
			}
		}
	}
	d.Struct(n, path, []yaml11.Field{
		{Name: "max_output_tokens", Decode: optInt(&g.MaxOutputTokens, 1, 0)},
		{Name: "context_window_tokens", Decode: optInt(&g.ContextWindowTokens, 1, 0)},
		{Name: "compact_at_percent", Decode: optInt(&g.CompactAtPercent, 1, 100)},
		{Name: "compact_at_tokens", Decode: optInt(&g.CompactAtTokens, 1, 0)},
		{Name: "thinking_effort", Decode: func(n *yaml11.Node, path string) {
			if yaml11.IsNull(n) {
				return
			}
			g.ThinkingEffort, _ = p.oneOf(n, path, thinkingEfforts...)
		}},
		{Name: "extra", Decode: func(n *yaml11.Node, path string) {
			if !p.mapping(n, path) {
				return
			}
			v, _ := d.Any(n, path)
			g.Extra, _ = v.(map[string]any)
			if mode := n.Get("goose_system_prompt_mode"); mode != nil {
				if s, ok := g.Extra["goose_system_prompt_mode"].(string); !ok || (s != "append" && s != "set") {
					d.Errorf(mode, yaml11.Key(path, "goose_system_prompt_mode"), "generation.extra.goose_system_prompt_mode must be append or set")
				}
			}
		}},
	}, map[string]string{
		"temperature": "the original schema has no temperature and troupe keeps it that way",
	})
	if out, window := g.MaxOutputTokens, g.ContextWindowTokens; out != nil && window != nil {
		if *out >= *window {
			d.Errorf(places[yaml11.Key(path, "max_output_tokens")], yaml11.Key(path, "max_output_tokens"),
				"max_output_tokens %d must be less than context_window_tokens %d; buzz-agent reserves it from the window, so an equal or larger value forces compaction on every turn", *out, *window)
		} else if at := g.CompactAtTokens; at != nil && *at > *window-*out {
			d.Errorf(places[yaml11.Key(path, "compact_at_tokens")], yaml11.Key(path, "compact_at_tokens"),
				"compact_at_tokens %d exceeds the window minus max_output_tokens (%d); buzz-agent reserves room for the response, so this can never fire", *at, *window-*out)
		}
	}
	return g
}

func (p *parser) budget(n *yaml11.Node, path string) Budget {
	var b Budget
	if !p.mapping(n, path) {
		return b
	}
	optInt := func(dst **int64) func(*yaml11.Node, string) {
		return func(n *yaml11.Node, path string) { *dst, _ = p.optionalInt(n, path, 1, 0) }
	}
	p.d.Struct(n, path, []yaml11.Field{
		{Name: "max_calls", Decode: optInt(&b.MaxCalls)},
		{Name: "max_input_tokens", Decode: optInt(&b.MaxInputTokens)},
		{Name: "max_output_tokens", Decode: optInt(&b.MaxOutputTokens)},
		{Name: "max_cost_usd", Decode: func(n *yaml11.Node, path string) { b.MaxCostUSD, _ = p.optionalPositiveFloat(n, path) }},
	}, nil)
	return b
}

func (p *parser) price(n *yaml11.Node, path string) Price {
	var pr Price
	nonNegative := func(dst *float64) func(*yaml11.Node, string) {
		return func(n *yaml11.Node, path string) {
			if v, ok := p.d.Float(n, path); ok {
				if v < 0 {
					p.d.Errorf(n, path, "must be zero or more, found %s", n.Text)
					return
				}
				*dst = v
			}
		}
	}
	p.d.Struct(n, path, []yaml11.Field{
		{Name: "input_per_million_usd", Required: true, Decode: nonNegative(&pr.InputPerMillionUSD)},
		{Name: "cached_input_per_million_usd", Required: true, Decode: nonNegative(&pr.CachedInputPerMillionUSD)},
		{Name: "output_per_million_usd", Required: true, Decode: nonNegative(&pr.OutputPerMillionUSD)},
		{Name: "cache_read_rate", Decode: func(n *yaml11.Node, path string) {
			if v, ok := p.d.Float(n, path); ok {
				if v < 0 || v > 1 {
					p.d.Errorf(n, path, "must be between 0 and 1 (the share of input assumed cached), found %s", n.Text)
					return
				}
				pr.CacheReadRate = v
			}
		}},
	}, nil)
	return pr
}

func (p *parser) trialBudget(n *yaml11.Node, path string) TrialBudget {
	var tb TrialBudget
	p.d.Struct(n, path, []yaml11.Field{
		{Name: "timeout_seconds", Required: true, Decode: func(n *yaml11.Node, path string) {
			tb.TimeoutSeconds, _ = p.positiveInt(n, path)
		}},
		{Name: "max_cost_usd", Decode: func(n *yaml11.Node, path string) { tb.MaxCostUSD, _ = p.optionalPositiveFloat(n, path) }},
	}, nil)
	return tb
}

func (p *parser) environment(n *yaml11.Node, path string) Environment {
	var e Environment
	if !p.mapping(n, path) {
		return e
	}
	optInt := func(dst **int64) func(*yaml11.Node, string) {
		return func(n *yaml11.Node, path string) { *dst, _ = p.optionalInt(n, path, 1, 0) }
	}
	p.d.Struct(n, path, []yaml11.Field{
		{Name: "override_cpus", Decode: optInt(&e.OverrideCPUs)},
		{Name: "override_memory_mb", Decode: optInt(&e.OverrideMemoryMB)},
		{Name: "override_storage_mb", Decode: optInt(&e.OverrideStorageMB)},
		{Name: "override_pids", Decode: optInt(&e.OverridePids)},
	}, map[string]string{
		"override_gpus": "GPU overrides are not supported",
	})
	return e
}

// mapping reports whether n is a mapping, recording a problem when it is not.
// A null where a section is expected gets its own advice: an empty section
// is written {} or left out.
func (p *parser) mapping(n *yaml11.Node, path string) bool {
	switch {
	case n.Kind == yaml11.Map:
		return true
	case yaml11.IsNull(n):
		p.d.Errorf(n, path, "is empty; give it keys, write {}, or leave it out")
	default:
		p.d.Errorf(n, path, "must be a mapping, found %s", n.Kind)
	}
	return false
}

func (p *parser) nonEmpty(n *yaml11.Node, path string) (string, bool) {
	s, ok := p.d.String(n, path)
	if ok && s == "" {
		p.d.Errorf(n, path, "must not be empty")
		return "", false
	}
	return s, ok
}

func (p *parser) oneOf(n *yaml11.Node, path string, allowed ...string) (string, bool) {
	s, ok := p.d.String(n, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		p.d.Errorf(n, path, "must be one of %s; found %q", strings.Join(allowed, ", "), s)
		return "", false
	}
	return s, true
}

func (p *parser) positiveInt(n *yaml11.Node, path string) (int64, bool) {
	v, ok := p.d.Int(n, path)
	if ok && v <= 0 {
		p.d.Errorf(n, path, "must be greater than 0, found %d", v)
		return 0, false
	}
	return v, ok
}

// optionalInt decodes null or an integer in [lo, hi] (hi 0: no upper bound).
func (p *parser) optionalInt(n *yaml11.Node, path string, lo, hi int64) (*int64, bool) {
	if yaml11.IsNull(n) {
		return nil, true
	}
	v, ok := p.d.Int(n, path)
	if !ok {
		return nil, false
	}
	if v < lo || (hi != 0 && v > hi) {
		if hi != 0 {
			p.d.Errorf(n, path, "must be between %d and %d, found %d", lo, hi, v)
		} else {
			p.d.Errorf(n, path, "must be greater than 0, found %d", v)
		}
		return nil, false
	}
	return &v, true
}

func (p *parser) optionalPositiveFloat(n *yaml11.Node, path string) (*float64, bool) {
	if yaml11.IsNull(n) {
		return nil, true
	}
	v, ok := p.d.Float(n, path)
	if !ok {
		return nil, false
	}
	if v <= 0 {
		p.d.Errorf(n, path, "must be greater than 0, found %s", n.Text)
		return nil, false
	}
	return &v, true
}
