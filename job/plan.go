package job

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// Plan is a job expanded before it runs, as plain data: which trials, in
// which order, with which stacks, tasks and images, and (Resume) which of
// them an existing job folder already holds. `troupe run --dry-run`
// prints it; Run walks it.
type Plan struct {
	Dir         string `json:"dir"`
	Attempts    int    `json:"attempts"`
	Concurrency int    `json:"concurrency"`
	Retries     int    `json:"retries"`
	// Sequential is a sequential job's test (--until-decided): its rounds
	// run only the trials of conditions not yet decided. Nil for a fixed
	// design, which runs every trial.
	Sequential *Sequential     `json:"sequential,omitempty"`
	Conditions []PlanCondition `json:"conditions"`
	Tasks      []PlanTask      `json:"tasks"`
	Stacks     []PlanStack     `json:"stacks"`
	Images     []Image         `json:"images"`
	// Trials are in the order the job launches them: attempts outermost,
	// conditions innermost, so that an interrupted job has spread its
	// trials over every condition.
	Trials []*PlanTrial `json:"trials"`

	spec Spec
}

// PlanCondition is one condition of a plan: its manifest and the stack
// each of its agents runs.
type PlanCondition struct {
	Name         string       `json:"name"`
	Manifest     string       `json:"manifest"`
	ManifestHash string       `json:"manifest_sha256"`
	Oracle       bool         `json:"oracle,omitempty"`
	Agents       []AgentStack `json:"agents"`
}

// AgentStack is an agent of a condition and the stack it runs.
type AgentStack struct {
	Agent string `json:"agent"`
	Stack string `json:"stack"`
}

// PlanTask is one task of a plan, by the digest its trials record.
type PlanTask struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Digest string `json:"digest"`
	// HostPaths are the host paths its compose file binds, each as the
	// trials mount it.
	HostPaths []PlanHostPath `json:"host_paths,omitempty"`
}

// PlanHostPath is a task's bind of a host path: the service, the path
// as the compose file gives it and as mounted (links resolved), where,
// and whether the service may write there.
type PlanHostPath struct {
	Service string `json:"service"`
	Source  string `json:"source"`
	Host    string `json:"host"`
	Target  string `json:"target"`
	Write   bool   `json:"write"`
}

// PlanStack is a stack the plan's agents run: where it is defined, the
// digest of its files, command and environment (what lock.json pins), and
// the conditions whose agents run it.
type PlanStack struct {
	Name       string   `json:"name"`
	Source     string   `json:"source"`
	Digest     string   `json:"digest"`
	Conditions []string `json:"conditions"`
	// Unchecked is what the host cannot check of the programs the stack
	// starts (stack.Unchecked): what the task images must hold.
	Unchecked []string `json:"unchecked,omitempty"`
}

// PlanTrial is one trial of a plan.
type PlanTrial struct {
	// Name is its folder's (trialdir.TrialName).
	Name      string `json:"name"`
	Task      string `json:"task"`
	Condition string `json:"condition"`
	Attempt   int    `json:"attempt"`
	// Agents are its condition's agents and the stack each runs.
	Agents []AgentStack `json:"agents"`
	// State is what the run does with it (Resume): run it, keep its
	// result, or set its folder aside and run it again.
	State State `json:"state"`
	// Why says why a trial is redone: unfinished (its run did not end
	// with a verdict) or other-inputs (its result is of another manifest
	// or task).
	Why string `json:"why,omitempty"`
	// Outcome is a kept trial's.
	Outcome outcome.Outcome `json:"outcome,omitempty"`

	cond Condition
	task *task.Task
	// kept is a kept trial's result: the job counts it.
	kept *trialdir.TrialResult
}

// State is what a job's run does with a trial of its plan.
type State string

// The states of a planned trial.
const (
	// ToRun: the job folder holds nothing of it.
	ToRun State = "run"
	// Kept: the folder holds its finished result, of the same inputs.
	Kept State = "kept"
	// Redo: the folder holds an unfinished run of it, or a result of other
	// inputs: it is moved to .superseded/ and run again.
	Redo State = "redo"
)

// maxChannelID is the relay's limit on a channel id: the trial's name and
// "-" and 8 hex digits.
const maxChannelID = 128

// NewPlan expands a job's conditions × tasks × attempts into its trials
// and says what they use. It refuses a job without manifests or tasks, a
// condition or task whose name cannot name a folder and a channel, two
// rosters under one condition name, an agent whose stack is undefined or
// whose files differ from their digests, and a trial name too long for a
// channel. It reads nothing but the stacks' files, to check them; the job
// folder is Resume's. Attempts and Concurrency below 1 are 1.
func NewPlan(spec Spec) (*Plan, error) {
	spec.Attempts, spec.Concurrency = max(spec.Attempts, 1), max(spec.Concurrency, 1)
	if len(spec.Conditions) == 0 {
		return nil, errors.New("no manifests")
	}
	if len(spec.Tasks) == 0 {
		return nil, errors.New("no tasks")
	}
	if err := checkInputs(spec); err != nil {
		return nil, err
	}
	byName, err := conditionsByName(spec.Conditions)
	if err != nil {
		return nil, err
	}
	p := &Plan{Dir: spec.Dir, Attempts: spec.Attempts, Concurrency: spec.Concurrency, Retries: spec.Retries, Sequential: spec.Sequential, spec: spec}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		c := byName[name]
		p.Conditions = append(p.Conditions, PlanCondition{Name: name, Manifest: c.Path, ManifestHash: c.Team.Manifest.Hash(), Oracle: c.Oracle, Agents: agentStacks(c)})
	}
	var bindErrs []error
	for _, t := range spec.Tasks {
		pt := PlanTask{Name: t.Name, Path: t.Dir, Digest: t.Digest}
		binds, err := spec.HostPaths.Binds(t)
		bindErrs = append(bindErrs, err)
		for _, b := range binds {
			pt.HostPaths = append(pt.HostPaths, PlanHostPath{Service: b.Service, Source: b.Source, Host: b.Host, Target: b.Target, Write: b.Write})
		}
		p.Tasks = append(p.Tasks, pt)
		p.Images = append(p.Images, TaskImages(t)...)
	}
	if err := errors.Join(bindErrs...); err != nil {
		return nil, err
	}
	p.Stacks = planStacks(spec.Conditions)
	for attempt := 1; attempt <= spec.Attempts; attempt++ {
		for _, t := range spec.Tasks {
			for _, c := range p.Conditions {
				name := trialdir.TrialName(t.Name, c.Name, attempt)
				if len(name)+len("-")+8 > maxChannelID {
					return nil, fmt.Errorf("trial %s: the name is too long for a relay channel (%d characters with its 9-character suffix): shorten the task's folder name or the condition", name, maxChannelID)
				}
				p.Trials = append(p.Trials, &PlanTrial{Name: name, Task: t.Name, Condition: c.Name, Attempt: attempt, Agents: c.Agents, State: ToRun, cond: byName[c.Name], task: t})
			}
		}
	}
	return p, nil
}

// checkInputs: conditions and tasks name trial folders and relay channels
// ("<task>__<condition>__<attempt>"); each condition's agents' stacks are
// defined and match their digests. Every problem, joined.
func checkInputs(spec Spec) error {
	var errs []error
	for _, t := range spec.Tasks {
		if err := checkFolderName(t.Name); err != nil {
			errs = append(errs, fmt.Errorf("task %s: its folder name %w", t.Dir, err))
		}
	}
	for _, c := range spec.Conditions {
		errs = append(errs, CheckConditionName(c.Team.Manifest), CheckStacks(c.Team.Manifest, c.Stacks))
	}
	return errors.Join(errs...)
}

// checkFolderName refuses a name that cannot be part of a folder and a
// channel: empty, a dot or two, a slash, a quote or a space.
func checkFolderName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\"'`") || strings.IndexFunc(name, unicode.IsSpace) >= 0 {
		return fmt.Errorf("%q cannot name a trial folder and channel: use letters, digits, '.', '_' or '-', with no spaces, slashes or quotes", name)
	}
	return nil
}

// conditionsByName are the job's conditions by name (checkInputs checked
// their stacks). One name may come twice only for the same roster.
func conditionsByName(conds []Condition) (map[string]Condition, error) {
	byName := map[string]Condition{}
	for _, c := range conds {
		m := c.Team.Manifest
		if other, ok := byName[m.Condition]; ok && other.Team.Manifest.Hash() != m.Hash() {
			return nil, fmt.Errorf("%s and %s both name condition %q with different rosters: conditions name trial folders and must be unique", other.Path, c.Path, m.Condition)
		}
		byName[m.Condition] = c
	}
	return byName, nil
}

// agentStacks are a condition's agents with their stacks' names; the
// stacks resolve (checkInputs checked them).
func agentStacks(c Condition) []AgentStack {
	var out []AgentStack
	for _, a := range c.Team.Agents {
		name := string(a.Harness)
		if st, err := c.Stacks.Resolve(name); err == nil {
			name = st.Name
		}
		out = append(out, AgentStack{Agent: a.ID, Stack: name})
	}
	return out
}

// planStacks are the stacks the conditions' agents run, in the order they
// first come, each with the conditions that run it.
func planStacks(conds []Condition) []PlanStack {
	var out []PlanStack
	for _, c := range conds {
		for _, a := range c.Team.Agents {
			st, err := c.Stacks.Resolve(string(a.Harness))
			if err != nil {
				continue
			}
			i := slices.IndexFunc(out, func(s PlanStack) bool { return s.Name == st.Name })
			if i < 0 {
				out = append(out, PlanStack{Name: st.Name, Source: st.Source, Digest: st.Digest(), Unchecked: st.Unchecked()})
				i = len(out) - 1
			}
			if cond := c.Team.Manifest.Condition; !slices.Contains(out[i].Conditions, cond) {
				out[i].Conditions = append(out[i].Conditions, cond)
			}
		}
	}
	return out
}
