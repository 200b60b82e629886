package llm

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/nbd-wtf/go-nostr/nip19"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/modelcall"
)

// Scenario scripts what mock models answer: for each agent (by agent id,
// class id, role, or "*"), a list of steps, one consumed per call in
// order, except the steps a When chooses calls for. It is read from YAML
// (docs/mock-scenarios.md).
type Scenario struct {
	Name        string
	Description string
	scripts     map[string][]scriptItem
	order       []string // the script keys, as the file lists them
}

// scriptItem is a step, or a choice between branches of steps.
type scriptItem struct {
	step   Step
	choice *choice
}

// choice is a `choose` item: one of its branches, by weight, seeded by the
// trial's name, so that a rerun of the same trial chooses alike and a
// roster passes with a set probability across attempts.
type choice struct {
	line     int
	branches []branch
}

type branch struct {
	weight float64
	items  []scriptItem
}

// resolve flattens a script for one trial: each choice replaced by the
// steps of the branch the trial's seed picks.
func resolve(items []scriptItem, scenario, trialName string) []Step {
	var steps []Step
	for _, it := range items {
		if it.choice == nil {
			steps = append(steps, it.step)
			continue
		}
		total := 0.0
		for _, b := range it.choice.branches {
			total += b.weight
		}
		u := seedFraction(scenario, trialName, it.choice.line) * total
		for i, b := range it.choice.branches {
			if u < b.weight || i == len(it.choice.branches)-1 {
				steps = append(steps, resolve(b.items, scenario, trialName)...)
				break
			}
			u -= b.weight
		}
	}
	return steps
}

// seedFraction is a number in [0, 1) fixed by the scenario, the trial's
// name and the choice's line: the same on every run, and independent from
// one trial (or choice) to the next.
func seedFraction(scenario, trialName string, line int) float64 {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", scenario, trialName, line))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

// Scripts lists the scenario's script keys in the order of its file.
func (sc *Scenario) Scripts() []string { return slices.Clone(sc.order) }

// Step is one scripted answer.
type Step struct {
	Name string
	// When, when set, chooses the calls the step answers, whatever their
	// place in the script: a call is answered by the first step whose When
	// matches it and that is not used up, and by the next step in order
	// (one without When) only when there is none. Nil: the step answers
	// the call its place in the order gives it.
	When *When
	// Repeat keeps a step with When for every call it matches (a side
	// call an agent makes again and again); without it the step answers
	// one call, or its Error's Times.
	Repeat bool
	// Match, when set, must hold for the request's last message, or the
	// mock answers with an error naming the step (never something
	// plausible). It checks the call the step was given; it chooses none.
	Match     *Match
	Reply     *template.Template
	ToolCalls []ToolCall
	// Usage overrides the estimated token counts.
	Usage *StepUsage
	// Delay holds the answer; ChunkDelay separates streamed chunks.
	Delay, ChunkDelay time.Duration
	// Chunks is how many pieces a streamed text is split into.
	Chunks int
	// Error answers with an HTTP error Times times before the script goes on.
	Error *StepError
	// CutAfterChunks ends a streamed answer early; Hang never answers.
	CutAfterChunks int
	Hang           bool

	line int
}

// When chooses calls by what they ask: each pattern set (a regular
// expression, RE2 syntax, found anywhere in its text unless anchored;
// (?i) ignores case) must match. A side call an agent makes beside its
// main one (a session title, a summary) is told apart by its system
// prompt.
type When struct {
	// System is matched against the request's system prompt
	// (modelcall.Prompt.System); LastUser against its last user message
	// (modelcall.Prompt.LastUser). Nil matches any.
	System, LastUser *regexp.Regexp
}

// matches reports whether a request's prompt is one the step answers.
func (w *When) matches(p modelcall.Prompt) bool {
	return (w.System == nil || w.System.MatchString(p.System)) && (w.LastUser == nil || w.LastUser.MatchString(p.LastUser))
}

// Match tests the last message of a request.
type Match struct {
	Contains string
	// Role is user, assistant, tool or system; empty matches any.
	Role string
}

// ToolCall is a scripted tool call; string values in Arguments are templates.
type ToolCall struct {
	Name      string
	Arguments any
}

// StepUsage is a step's token counts; Cached nil means "not reported".
// Reasoning is the part of Output spent reasoning, reported only in OpenAI's
// shapes.
type StepUsage struct {
	Input, Output int64
	Cached        *int64
	Reasoning     int64
}

// StepError is a scripted HTTP error.
type StepError struct {
	Status     int
	RetryAfter time.Duration
	Message    string
	Times      int
}

// LoadScenario reads a scenario file.
func LoadScenario(name string, data []byte) (*Scenario, error) {
	root, err := yaml11.Parse(name, data)
	if err != nil {
		return nil, err
	}
	d := &yaml11.Decoder{File: name}
	sc := &Scenario{Name: strings.TrimSuffix(filepath.Base(name), filepath.Ext(name)), scripts: map[string][]scriptItem{}}
	d.Struct(root, "", []yaml11.Field{
		{Name: "description", Decode: func(n *yaml11.Node, p string) { sc.Description, _ = d.String(n, p) }},
		{Name: "scripts", Required: true, Decode: func(n *yaml11.Node, p string) {
			d.Map(n, p, func(key string, _, v *yaml11.Node, p string) {
				if _, dup := sc.scripts[key]; !dup {
					sc.order = append(sc.order, key)
				}
				sc.scripts[key] = parseItems(d, v, p)
			})
		}},
	}, nil)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return sc, nil
}

func parseTemplate(d *yaml11.Decoder, n *yaml11.Node, path, text string) *template.Template {
	t, err := template.New(path).Option("missingkey=error").Parse(text)
	if err != nil {
		d.Errorf(n, path, "template: %v", err)
		return nil
	}
	return t
}

// parseItems reads a list of steps and choices.
func parseItems(d *yaml11.Decoder, n *yaml11.Node, path string) []scriptItem {
	var items []scriptItem
	d.Seq(n, path, func(item *yaml11.Node, p string) {
		if item.Kind == yaml11.Map && item.Get("choose") != nil {
			items = append(items, scriptItem{choice: parseChoice(d, item, p)})
			return
		}
		items = append(items, scriptItem{step: parseStep(d, item, p)})
	})
	if n.Kind == yaml11.Seq && len(n.Items) == 0 {
		d.Errorf(n, path, "a script needs at least one step")
	}
	return items
}

// parseChoice reads {choose: [{weight, steps}, ...]}.
func parseChoice(d *yaml11.Decoder, n *yaml11.Node, path string) *choice {
	c := &choice{line: n.Line}
	d.Struct(n, path, []yaml11.Field{
		{Name: "choose", Required: true, Decode: func(n *yaml11.Node, p string) {
			d.Seq(n, p, func(item *yaml11.Node, p string) {
				b := branch{weight: -1}
				d.Struct(item, p, []yaml11.Field{
					{Name: "weight", Required: true, Decode: func(n *yaml11.Node, p string) {
						if v, ok := d.Float(n, p); ok {
							if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
								d.Errorf(n, p, "must be a number of at least 0")
							}
							b.weight = v
						}
					}},
					{Name: "steps", Required: true, Decode: func(n *yaml11.Node, p string) { b.items = parseItems(d, n, p) }},
				}, nil)
				c.branches = append(c.branches, b)
			})
			total := 0.0
			for _, b := range c.branches {
				total += max(b.weight, 0)
			}
			if n.Kind == yaml11.Seq && (len(n.Items) < 2 || total <= 0) {
				d.Errorf(n, p, "a choice needs two branches or more, and weights that add up to more than 0")
			}
		}},
	}, nil)
	return c
}

// parseStep reads one scripted answer.
func parseStep(d *yaml11.Decoder, n *yaml11.Node, path string) Step {
	st := Step{line: n.Line}
	ms := func(n *yaml11.Node, p string) time.Duration {
		v, ok := d.Int(n, p)
		if ok && v < 0 {
			d.Errorf(n, p, "must not be negative")
		}
		return time.Duration(v) * time.Millisecond
	}
	d.Struct(n, path, []yaml11.Field{
		{Name: "name", Decode: func(n *yaml11.Node, p string) { st.Name, _ = d.String(n, p) }},
		{Name: "when", Decode: func(n *yaml11.Node, p string) { st.When = parseWhen(d, n, p) }},
		{Name: "repeat", Decode: func(n *yaml11.Node, p string) { st.Repeat, _ = d.Bool(n, p) }},
		{Name: "match", Decode: func(n *yaml11.Node, p string) { st.Match = parseMatch(d, n, p) }},
		{Name: "reply", Decode: func(n *yaml11.Node, p string) {
			if s, ok := d.String(n, p); ok {
				st.Reply = parseTemplate(d, n, p, s)
			}
		}},
		{Name: "tool_calls", Decode: func(n *yaml11.Node, p string) { st.ToolCalls = parseToolCalls(d, n, p) }},
		{Name: "usage", Decode: func(n *yaml11.Node, p string) { st.Usage = parseStepUsage(d, n, p) }},
		{Name: "delay_ms", Decode: func(n *yaml11.Node, p string) { st.Delay = ms(n, p) }},
		{Name: "chunk_delay_ms", Decode: func(n *yaml11.Node, p string) { st.ChunkDelay = ms(n, p) }},
		{Name: "chunks", Decode: func(n *yaml11.Node, p string) {
			v, _ := d.Int(n, p)
			st.Chunks = int(v)
		}},
		{Name: "error", Decode: func(n *yaml11.Node, p string) { st.Error = parseStepError(d, n, p) }},
		{Name: "cut_after_chunks", Decode: func(n *yaml11.Node, p string) {
			v, _ := d.Int(n, p)
			st.CutAfterChunks = int(v)
		}},
		{Name: "hang", Decode: func(n *yaml11.Node, p string) { st.Hang, _ = d.Bool(n, p) }},
	}, nil)
	if st.Reply == nil && len(st.ToolCalls) == 0 && st.Error == nil && !st.Hang && n.Kind == yaml11.Map {
		d.Errorf(n, path, "a step needs a reply, tool_calls, an error or hang")
	}
	if r := n.Get("repeat"); st.Repeat && st.When == nil {
		d.Errorf(r, yaml11.Key(path, "repeat"), "repeat needs when: a step in the order answers one call")
	}
	return st
}

// parseWhen reads a step's {system, last_user}: regular expressions.
func parseWhen(d *yaml11.Decoder, n *yaml11.Node, path string) *When {
	w := &When{}
	pattern := func(dst **regexp.Regexp) func(n *yaml11.Node, p string) {
		return func(n *yaml11.Node, p string) {
			s, ok := d.String(n, p)
			if !ok {
				return
			}
			re, err := regexp.Compile(s)
			if err != nil {
				d.Errorf(n, p, "not a regular expression (Go's RE2 syntax): %v", err)
				return
			}
			*dst = re
		}
	}
	d.Struct(n, path, []yaml11.Field{
		{Name: "system", Decode: pattern(&w.System)},
		{Name: "last_user", Decode: pattern(&w.LastUser)},
	}, nil)
	if n.Kind == yaml11.Map && n.Get("system") == nil && n.Get("last_user") == nil {
		d.Errorf(n, path, "when needs system or last_user (or both): a regular expression the call's system prompt or last user message must match")
	}
	return w
}

// parseMatch reads a step's {contains, role}.
func parseMatch(d *yaml11.Decoder, n *yaml11.Node, path string) *Match {
	m := &Match{}
	d.Struct(n, path, []yaml11.Field{
		{Name: "contains", Decode: func(n *yaml11.Node, p string) { m.Contains, _ = d.String(n, p) }},
		{Name: "role", Decode: func(n *yaml11.Node, p string) {
			m.Role, _ = d.String(n, p)
			switch m.Role {
			case "user", "assistant", "tool", "system":
			default:
				d.Errorf(n, p, "must be user, assistant, tool or system")
			}
		}},
	}, nil)
	return m
}

// parseToolCalls reads a step's [{name, arguments}].
func parseToolCalls(d *yaml11.Decoder, n *yaml11.Node, path string) []ToolCall {
	var calls []ToolCall
	d.Seq(n, path, func(item *yaml11.Node, p string) {
		var tc ToolCall
		d.Struct(item, p, []yaml11.Field{
			{Name: "name", Required: true, Decode: func(n *yaml11.Node, p string) { tc.Name, _ = d.String(n, p) }},
			{Name: "arguments", Decode: func(n *yaml11.Node, p string) { tc.Arguments = parseArguments(d, n, p) }},
		}, nil)
		calls = append(calls, tc)
	})
	return calls
}

// parseStepUsage reads a step's {input_tokens, output_tokens,
// cached_tokens, reasoning_tokens}.
func parseStepUsage(d *yaml11.Decoder, n *yaml11.Node, path string) *StepUsage {
	u := &StepUsage{}
	d.Struct(n, path, []yaml11.Field{
		{Name: "input_tokens", Decode: func(n *yaml11.Node, p string) { u.Input, _ = d.Int(n, p) }},
		{Name: "output_tokens", Decode: func(n *yaml11.Node, p string) { u.Output, _ = d.Int(n, p) }},
		{Name: "cached_tokens", Decode: func(n *yaml11.Node, p string) {
			if v, ok := d.Int(n, p); ok {
				u.Cached = &v
			}
		}},
		{Name: "reasoning_tokens", Decode: func(n *yaml11.Node, p string) { u.Reasoning, _ = d.Int(n, p) }},
	}, nil)
	if u.Reasoning > u.Output {
		d.Errorf(n, path, "reasoning_tokens (%d) are part of output_tokens (%d) and cannot exceed them", u.Reasoning, u.Output)
	}
	return u
}

// parseStepError reads a step's {status, retry_after_s, message, times}.
func parseStepError(d *yaml11.Decoder, n *yaml11.Node, path string) *StepError {
	e := &StepError{Times: 1}
	d.Struct(n, path, []yaml11.Field{
		{Name: "status", Required: true, Decode: func(n *yaml11.Node, p string) {
			v, _ := d.Int(n, p)
			if v < 400 || v > 599 {
				d.Errorf(n, p, "must be an HTTP error status (400 to 599)")
			}
			e.Status = int(v)
		}},
		{Name: "retry_after_s", Decode: func(n *yaml11.Node, p string) {
			v, _ := d.Int(n, p)
			e.RetryAfter = time.Duration(v) * time.Second
		}},
		{Name: "message", Decode: func(n *yaml11.Node, p string) { e.Message, _ = d.String(n, p) }},
		{Name: "times", Decode: func(n *yaml11.Node, p string) {
			v, _ := d.Int(n, p)
			if v < 1 {
				d.Errorf(n, p, "must be at least 1")
			}
			e.Times = int(v)
		}},
	}, nil)
	return e
}

// parseArguments keeps a tool call's arguments as plain values with every
// string turned into a template.
func parseArguments(d *yaml11.Decoder, n *yaml11.Node, path string) any {
	switch n.Kind {
	case yaml11.Map:
		out := map[string]any{}
		d.Map(n, path, func(key string, _, v *yaml11.Node, p string) { out[key] = parseArguments(d, v, p) })
		return out
	case yaml11.Seq:
		out := make([]any, len(n.Items))
		for i, item := range n.Items {
			out[i] = parseArguments(d, item, yaml11.Index(path, i))
		}
		return out
	case yaml11.String:
		return parseTemplate(d, n, path, n.Text)
	}
	v, _ := d.Any(n, path)
	return v
}

// ScenarioOf is the scenario a mock endpoint plays, loaded as its trials
// load it. The gateway must be open.
func (g *Gateway) ScenarioOf(endpoint string) (*Scenario, error) {
	ep, ok := g.endpoint(endpoint)
	if !ok || ep.API != Mock {
		return nil, fmt.Errorf("llm: endpoint %q is no mock endpoint", endpoint)
	}
	return g.scenario(ep.Scenario)
}

// scenario loads a scenario by name: a built-in one (Gateway.Scenarios) or,
// for a name with a slash or a .yaml suffix, a file (relative to
// Gateway.ScenarioDir). Loaded scenarios are kept.
func (g *Gateway) scenario(name string) (*Scenario, error) {
	g.mu.Lock()
	sc, ok := g.scenarios[name]
	g.mu.Unlock()
	if ok {
		return sc, nil
	}
	var data []byte
	var err error
	label := name
	if strings.ContainsRune(name, '/') || strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") {
		path := name
		if !filepath.IsAbs(path) && g.ScenarioDir != "" {
			path = filepath.Join(g.ScenarioDir, path)
		}
		label = path
		data, err = os.ReadFile(path)
	} else if g.Scenarios != nil {
		label = name + ".yaml (built in)"
		data, err = fs.ReadFile(g.Scenarios, name+".yaml")
	} else {
		err = fs.ErrNotExist
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("mock scenario %q not found; give a file path or one of the built-in scenarios", name)
		}
		return nil, fmt.Errorf("mock scenario %s: %w", label, err)
	}
	sc, err = LoadScenario(label, data)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.scenarios[name] = sc
	g.mu.Unlock()
	return sc, nil
}

// Teammate is a trial fact a scenario's templates may use.
type Teammate struct {
	ID, Role, Kind, Pubkey string
}

// Npub is the teammate's pubkey as NIP-19 writes it ({{.User.Npub}}), as
// agents quote it; "" when the pubkey is not one.
func (t Teammate) Npub() string {
	npub, err := nip19.EncodePublicKey(t.Pubkey)
	if err != nil {
		return ""
	}
	return npub
}

// Facts are what a scenario's templates see: {{.Channel}},
// {{.Self.ID}}, {{(.Agent "worker-1").Pubkey}}, {{(.Agent "worker-1").Npub}},
// {{(.Role "implementer").ID}},
// {{.Orchestrator.ID}}, {{.User.Pubkey}}, {{.Last}}.
type Facts struct {
	Trial, Channel string
	Self           Teammate
	User           Teammate
	Orchestrator   Teammate
	Team           []Teammate
	// Last is the text of the last message of the call being answered: a
	// tool's result, a teammate's message. A scripted model quotes what it
	// read with it, as a real one may.
	Last string
}

// Agent returns the teammate with the given id.
func (f Facts) Agent(id string) (Teammate, error) {
	for _, t := range f.Team {
		if t.ID == id {
			return t, nil
		}
	}
	return Teammate{}, fmt.Errorf("no agent %q in this trial", id)
}

// Role returns the first teammate with the given role (in trial order).
func (f Facts) Role(role string) (Teammate, error) {
	for _, t := range f.Team {
		if t.Role == role {
			return t, nil
		}
	}
	return Teammate{}, fmt.Errorf("no agent with role %q in this trial", role)
}

var instanceSuffix = regexp.MustCompile(`-\d+$`)

// scriptCursor walks one agent's script.
type scriptCursor struct {
	scenario *Scenario
	key      string // the script chosen, "" when there is none
	steps    []Step // its steps, its choices made for the trial
	inOrder  int    // how many of them have no When
	facts    Facts

	mu    sync.Mutex
	next  int   // where the next step in order is looked for
	given []int // by step: the scripted errors it has answered
	used  []bool
	calls int
}

// cursor picks an agent's script: by agent id, class id, role, then "*".
func (sc *Scenario) cursor(spec TrialSpec, a AgentSpec) *scriptCursor {
	c := &scriptCursor{scenario: sc, facts: Facts{Trial: spec.ID, Channel: spec.Channel, User: Teammate{ID: "user", Role: "user", Kind: "user", Pubkey: spec.UserPubkey}}}
	for _, t := range spec.Agents {
		mate := Teammate{ID: t.ID, Role: t.Role, Kind: t.Kind, Pubkey: t.Pubkey}
		c.facts.Team = append(c.facts.Team, mate)
		if t.Kind == "orchestrator" {
			c.facts.Orchestrator = mate
		}
		if t.ID == a.ID {
			c.facts.Self = mate
		}
	}
	if c.key = sc.ScriptOf(a.ID, a.Role); c.key != "" {
		c.steps = resolve(sc.scripts[c.key], sc.Name, cmp.Or(spec.Name, spec.ID))
	}
	c.given, c.used = make([]int, len(c.steps)), make([]bool, len(c.steps))
	for _, st := range c.steps {
		if st.When == nil {
			c.inOrder++
		}
	}
	return c
}

// ScriptOf is the key of the script an agent plays: its id's, its class
// id's, its role's, or the wildcard's; "" when there is none.
func (sc *Scenario) ScriptOf(id, role string) string {
	for _, key := range []string{id, instanceSuffix.ReplaceAllString(id, ""), role, "*"} {
		if key != "" && sc.has(key) {
			return key
		}
	}
	return ""
}

// has says whether the scenario has a script of that key.
func (sc *Scenario) has(key string) bool {
	_, ok := sc.scripts[key]
	return ok
}

// Cast is a team that plays every script of the scenario, one agent
// each, in the scenario's order, on the endpoint: what troupe gateway
// serves to try a scenario by hand. A script keyed by a role or class id
// (lead) is played by <key>-1 (lead-1, or the next number when that is
// another script's key); one keyed by an agent id (worker-2) by that
// agent, whose role is its class id; the wildcard by other-1. The first
// is the orchestrator, as the first member of troupe relay's channel is.
func (sc *Scenario) Cast(endpoint string) []AgentSpec {
	var team []AgentSpec
	for _, key := range sc.order {
		if key == "" { // no agent plays it (ScriptOf)
			continue
		}
		a := AgentSpec{ID: key, Role: instanceSuffix.ReplaceAllString(key, ""), Kind: "worker", Endpoint: endpoint}
		if a.Role == key { // a role, a class id or the wildcard: an agent of it
			if key == "*" {
				a.Role = "other"
				for n := 2; sc.has(a.Role); n++ {
					a.Role = fmt.Sprintf("other%d", n)
				}
			}
			for n := 1; ; n++ {
				if a.ID = fmt.Sprintf("%s-%d", a.Role, n); sc.ScriptOf(a.ID, a.Role) == key {
					break
				}
			}
		}
		if len(team) == 0 {
			a.Kind = "orchestrator"
		}
		team = append(team, a)
	}
	return team
}

// errScript is a loud mock failure: the script does not cover the call.
type errScript struct {
	code, msg string
}

func (e *errScript) Error() string { return e.code + ": " + e.msg }

// take returns the step for a call and the call's number (from 1), or
// why there is no step.
func (c *scriptCursor) take(p modelcall.Prompt) (Step, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	n := c.calls
	if c.key == "" {
		return Step{}, n, &errScript{"mock_no_script", fmt.Sprintf("scenario %s has no script for agent %s (role %s); add one keyed by its id, class id, role or \"*\"", c.scenario.Name, c.facts.Self.ID, c.facts.Self.Role)}
	}
	i := c.pick(p)
	if i < 0 {
		msg := fmt.Sprintf("scenario %s, script %s: call %d of agent %s runs past the end of its %d steps", c.scenario.Name, c.key, n, c.facts.Self.ID, c.inOrder)
		if c.inOrder < len(c.steps) {
			msg += fmt.Sprintf(" in order, and no step's when that is not used up matches it (system prompt %q, last user message %q)", clip.Head(p.System, 200), clip.Head(p.LastUser, 200))
		}
		return Step{}, n, &errScript{"mock_script_exhausted", msg}
	}
	st := c.steps[i]
	if m := st.Match; m != nil && ((m.Role != "" && m.Role != p.LastRole) || !strings.Contains(p.LastText, m.Contains)) {
		return Step{}, n, &errScript{"mock_script_mismatch", fmt.Sprintf("scenario %s, script %s, step %d (line %d) expects the last message to be from %q and contain %q; agent %s's last message is from %q: %q",
			c.scenario.Name, c.key, i+1, st.line, cmp.Or(m.Role, "anyone"), m.Contains, c.facts.Self.ID, p.LastRole, clip.Head(p.LastText, 200))}
	}
	if st.Error != nil && c.given[i] < st.Error.Times {
		c.given[i]++
		if c.given[i] == st.Error.Times && st.Reply == nil && len(st.ToolCalls) == 0 {
			c.done(i, true) // errors are all it had to say
		}
		return Step{Error: st.Error, line: st.line, Name: st.Name}, n, nil
	}
	c.done(i, false)
	st.Error = nil // its errors were given; now its answer
	return st, n, nil
}

// pick is the index of the step that answers a call: the first step with
// a When that matches it and is not used up, else the next step in order;
// -1 when there is neither. c.mu is held.
func (c *scriptCursor) pick(p modelcall.Prompt) int {
	for i, st := range c.steps {
		if st.When != nil && !c.used[i] && st.When.matches(p) {
			return i
		}
	}
	for ; c.next < len(c.steps); c.next++ {
		if c.steps[c.next].When == nil {
			return c.next
		}
	}
	return -1
}

// done records that step i has answered: the order moves past a step in
// order; a step with When is used up, unless it repeats and has an answer
// left to give (last: its errors were all it had). c.mu is held.
func (c *scriptCursor) done(i int, last bool) {
	switch {
	case c.steps[i].When == nil:
		c.next = i + 1
	case !c.steps[i].Repeat || last:
		c.used[i] = true
	}
}

// render executes a template against the facts.
func (c *scriptCursor) render(t *template.Template, facts Facts) (string, error) {
	if t == nil {
		return "", nil
	}
	var b bytes.Buffer
	if err := t.Execute(&b, facts); err != nil {
		return "", fmt.Errorf("scenario %s: %v", c.scenario.Name, err)
	}
	return b.String(), nil
}

// renderArgs renders every template in a tool call's arguments.
func (c *scriptCursor) renderArgs(v any, facts Facts) (any, error) {
	switch v := v.(type) {
	case *template.Template:
		return c.render(v, facts)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			r, err := c.renderArgs(x, facts)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			r, err := c.renderArgs(x, facts)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}
