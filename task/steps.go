package task

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/suggest"
)

// Step is one step of a multi-step task, as Harbor defines it: an entry of
// task.toml's [[steps]] and its folder steps/<name>/ (instruction.md;
// tests/, solution/ and workdir/ optional). A trial runs the steps in
// order in one container (docs/run.md, "Multi-step tasks"). Its values
// fall back to the task's own where the step names none.
type Step struct {
	// Name is the step's name and its folder's, under steps/.
	Name string
	// Instruction is steps/<name>/instruction.md.
	Instruction string
	// TestsDir is steps/<name>/tests/ when there is one: uploaded to /tests
	// after the task's own tests/, its files overriding theirs; "" when
	// the step has none (the task's tests/test.sh then judges it).
	TestsDir string
	// SolutionDir is steps/<name>/solution/ when it holds solve.sh, for
	// the oracle; "" otherwise (the task's solution/ stands in).
	SolutionDir string
	// WorkdirDir is steps/<name>/workdir/ when there is one: copied into
	// the working folder before the step's agents start; Setup says it
	// holds setup.sh, which then runs there.
	WorkdirDir string
	Setup      bool
	// MinReward is the step's min_reward by reward key (a number is
	// {"reward": n}): below any, or without the key, the steps after it
	// do not run. nil: no threshold.
	MinReward map[string]float64
	// AgentTimeout and VerifierTimeout are the step's, else the task's.
	AgentTimeout, VerifierTimeout time.Duration
	// VerifierUser is the step's [steps.verifier] user, else the task's.
	VerifierUser string
	// VerifierEnv is the task's [verifier] env with the step's own over it.
	VerifierEnv map[string]string
}

// Harbor's multi_step_reward_strategy: how a trial's reward comes from its
// steps' (RewardStrategy).
const (
	// RewardMean is the mean of each reward key over the steps that have
	// a verifier result, a key a step lacks counting 0: Harbor's default.
	RewardMean = "mean"
	// RewardFinal is the last step that ran's rewards, as they are.
	RewardFinal = "final"
)

// stepName is the form of a step's name: a folder name of steps/.
var stepName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// stepKeys are the keys of a [[steps]] entry and of its tables.
var stepKeys = map[string][]string{
	"":         {"name", "agent", "verifier", "min_reward", "healthcheck", "artifacts"},
	"agent":    {"timeout_sec", "user", "network_mode", "allowed_hosts"},
	"verifier": {"timeout_sec", "env", "user", "environment_mode", "environment", "network_mode", "allowed_hosts"},
}

// applySteps reads [[steps]] and multi_step_reward_strategy. It runs after
// [agent] and [verifier] are read: a step's values fall back to theirs.
func (t *Task) applySteps(tf *taskFile, at locator, p *problems, getenv func(string) string) (warnings []*located.Error) {
	if tf.MultiStep != nil {
		f := at.at("", "multi_step_reward_strategy")
		s, ok := p.asString(f, tf.MultiStep)
		switch {
		case !ok:
		case s != RewardMean && s != RewardFinal:
			p.add(f, "%q is not \"mean\" or \"final\"", s)
		case len(tf.Steps) == 0:
			p.add(f, "applies to multi-step tasks only: give [[steps]], or remove it")
		default:
			t.RewardStrategy = s
		}
	}
	if len(tf.Steps) == 0 {
		return nil
	}
	if t.RewardStrategy == "" {
		t.RewardStrategy = RewardMean
	}
	seen := map[string]bool{}
	for i, m := range tf.Steps {
		sa := stepAt{loc: at, index: i}
		st, w := t.readStep(sa, m, p, getenv)
		warnings = append(warnings, w...)
		if st.Name == "" {
			continue
		}
		if seen[st.Name] {
			p.add(sa.at("", "name"), "%q names two steps: each step has its own folder steps/<name>/", st.Name)
			continue
		}
		seen[st.Name] = true
		t.Steps = append(t.Steps, st)
	}
	return warnings
}

// readStep reads one [[steps]] entry.
func (t *Task) readStep(sa stepAt, m map[string]any, p *problems, getenv func(string) string) (Step, []*located.Error) {
	st := Step{AgentTimeout: t.AgentTimeout, VerifierTimeout: t.VerifierTimeout, VerifierUser: t.VerifierUser, VerifierEnv: t.VerifierEnv}
	nf := sa.at("", "name")
	switch name, ok := p.asString(nf, m["name"]); {
	case !ok:
	case name == "":
		p.add(nf, "is required: the step's folder under steps/")
	case !stepName.MatchString(name):
		p.add(nf, "%q must be a folder name of steps/ (letters, digits, '.', '_' and '-')", name)
	default:
		st.Name = name
		sa.name = name
	}
	warnings := sa.unknown("", m)
	if v, ok := m["min_reward"]; ok {
		st.MinReward = minReward(sa.at("", "min_reward"), v, p)
	}
	if v, ok := m["healthcheck"]; ok && v != nil {
		p.add(sa.at("", "healthcheck"), "a step's own healthcheck is not supported yet: give it in [environment.healthcheck], which runs before the first step")
	}
	if v, ok := m["artifacts"]; ok && v != nil {
		p.add(sa.at("", "artifacts"), "a step's own artifacts are not supported yet: give them in the task's artifacts, collected after each step")
	}
	if a, ok := sa.table(p, m, "agent"); ok {
		warnings = append(warnings, sa.unknown("agent", a)...)
		p.seconds(sa.at("agent", "timeout_sec"), a["timeout_sec"], &st.AgentTimeout)
		if u := p.asUser(sa.at("agent", "user"), a["user"]); u != "" && u != t.AgentUser {
			p.add(sa.at("agent", "user"), "%q differs from [agent] user (%q): troupe's agents keep one identity (key, token, uid) across a trial's steps; give the user in [agent] user", u, t.AgentUser)
		}
		sa.refuseNetwork(p, "agent", a)
	}
	if v, ok := sa.table(p, m, "verifier"); ok {
		warnings = append(warnings, sa.unknown("verifier", v)...)
		p.seconds(sa.at("verifier", "timeout_sec"), v["timeout_sec"], &st.VerifierTimeout)
		if u := p.asUser(sa.at("verifier", "user"), v["user"]); u != "" {
			st.VerifierUser = u
		}
		if env, ok := v["env"]; ok {
			f := sa.at("verifier", "env")
			if em, ok := env.(map[string]any); ok {
				st.VerifierEnv = maps.Clone(t.VerifierEnv)
				if st.VerifierEnv == nil {
					st.VerifierEnv = map[string]string{}
				}
				maps.Copy(st.VerifierEnv, t.resolveEnv(f, em, p, getenv))
			} else {
				p.add(f, "must be a table of strings, found %v", env)
			}
		}
		if mode, ok := p.asString(sa.at("verifier", "environment_mode"), v["environment_mode"]); ok && mode != "" && mode != "shared" || v["environment"] != nil {
			p.add(sa.at("verifier", "environment_mode"), "a separate verifier environment is not supported yet: the verifier runs in the agents' container (\"shared\")")
		}
		sa.refuseNetwork(p, "verifier", v)
	}
	return st, warnings
}

// minReward reads min_reward: a number (the "reward" key's threshold) or a
// table of numbers by reward key.
func minReward(f field, v any, p *problems) map[string]float64 {
	if m, ok := v.(map[string]any); ok {
		out := map[string]float64{}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if x, ok := p.asFloat(f, m[k]); ok {
				out[k] = x
			}
		}
		if len(out) == 0 && len(m) == 0 {
			p.add(f, "an empty table sets no threshold: give a number, or {key = number, ...}")
		}
		return out
	}
	x, ok := p.asFloat(f, v)
	if !ok {
		return nil
	}
	return map[string]float64{"reward": x}
}

// stepAt locates the keys of the index-th [[steps]] entry in task.toml, and
// names them in messages as [steps.<name>.agent] timeout_sec.
type stepAt struct {
	loc   locator
	index int
	name  string
}

// at is a key of the entry ("" table) or of one of its tables.
func (s stepAt) at(table, key string) field {
	who := fmt.Sprintf("steps[%d]", s.index+1)
	if s.name != "" {
		who = "steps." + s.name
	}
	f := field{path: s.loc.path, table: strings.TrimSuffix(who+"."+table, "."), key: key}
	f.line = s.line(table, key)
	return f
}

// line finds the key in the entry's part of the file: after its
// [[steps]] header (the index-th), in its [steps.table] header's lines,
// or as table.key = … there; else the header's own line; 0 for an entry
// written inline.
func (s stepAt) line(table, key string) int {
	n, header, current := -1, 0, ""
	for i, line := range s.loc.lines {
		if m := headerRE.FindStringSubmatch(line); m != nil {
			name := strings.ReplaceAll(m[1], " ", "")
			if name == "steps" && strings.HasPrefix(strings.TrimSpace(line), "[[") {
				if n++; n > s.index {
					break
				}
				header, current = i+1, ""
				continue
			}
			if n == s.index {
				if !strings.HasPrefix(name, "steps.") {
					break // the entry's tables end at another table
				}
				current = strings.TrimPrefix(name, "steps.")
				if current == strings.TrimPrefix(table+"."+key, ".") {
					return i + 1
				}
			}
			continue
		}
		if n != s.index {
			continue
		}
		name, _, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		full := strings.TrimPrefix(current+"."+strings.ReplaceAll(strings.TrimSpace(name), " ", ""), ".")
		if full == strings.TrimPrefix(table+"."+key, ".") {
			return i + 1
		}
	}
	return header
}

// table reads a sub-table of the entry (agent, verifier); ok is false when
// there is none or it is not a table (recorded).
func (s stepAt) table(p *problems, m map[string]any, key string) (map[string]any, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, false
	}
	t, ok := v.(map[string]any)
	if !ok {
		p.add(s.at("", key), "must be a table, found %v", v)
	}
	return t, ok
}

// unknown warns of the keys of the entry's table ("" the entry) that Harbor
// does not define.
func (s stepAt) unknown(table string, m map[string]any) []*located.Error {
	known := stepKeys[table]
	var out []*located.Error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if slices.Contains(known, k) {
			continue
		}
		msg := "unknown key, ignored (Harbor ignores it too)"
		if guess := suggest.Closest(k, known); guess != "" {
			msg += fmt.Sprintf("; did you mean %q?", guess)
		}
		out = append(out, s.at(table, k).problem("%s", msg))
	}
	return out
}

// refuseNetwork refuses a step's own network policy: troupe gives each
// phase one network for the whole trial.
func (s stepAt) refuseNetwork(p *problems, table string, m map[string]any) {
	for _, k := range []string{"network_mode", "allowed_hosts"} {
		if m[k] != nil {
			p.add(s.at(table, k), "a step's own network is not supported yet: troupe gives the %ss one network for the whole trial; set it in [%s]", table, table)
		}
	}
}

// steps reads each step's folder, steps/<name>/: its instruction, tests,
// solution and workdir. Every step needs a test script, its own or the
// task's tests/test.sh, as in Harbor.
func (r *folderRead) steps() {
	t := r.t
	taskTests := r.d.IsFile("tests/test.sh")
	for i := range t.Steps {
		st := &t.Steps[i]
		dir := "steps/" + st.Name
		if !r.d.IsDir(dir) {
			r.problem("%s: missing: [[steps]] names %q, and each step's files are in steps/<name>/ (instruction.md, tests/, solution/, workdir/)", filepath.Join(r.abs, filepath.FromSlash(dir)), st.Name)
			continue
		}
		st.Instruction = r.readInstruction(dir + "/instruction.md")
		if r.d.IsDir(dir + "/tests") {
			st.TestsDir = r.host(dir + "/tests")
		}
		if !r.d.IsFile(dir+"/tests/test.sh") && !taskTests {
			r.problem("%s: missing, and so is tests/test.sh: step %s has no verifier (writing /logs/verifier/reward.txt or reward.json)", filepath.Join(r.abs, filepath.FromSlash(dir), "tests", "test.sh"), st.Name)
		}
		if r.d.IsFile(dir + "/solution/solve.sh") {
			st.SolutionDir = r.host(dir + "/solution")
		}
		if r.d.IsDir(dir + "/workdir") {
			st.WorkdirDir = r.host(dir + "/workdir")
			st.Setup = r.d.IsFile(dir + "/workdir/setup.sh")
		}
	}
}

// Solved reports whether the oracle has a solution for every step of the
// task (the step's solve.sh, else the task's), or, for a task without
// steps, its solution/solve.sh.
func (t *Task) Solved() bool {
	for _, st := range t.Steps {
		if st.SolutionDir == "" && t.SolutionDir == "" {
			return false
		}
	}
	return t.SolutionDir != "" || len(t.Steps) > 0
}
