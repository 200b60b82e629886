package job

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial"
)

// Condition is one manifest of a job, verified.
type Condition struct {
	Path string
	Team *manifest.Team
	// Oracle runs each task's solution/solve.sh instead of the team
	// (OracleCondition).
	Oracle bool
	// Stacks are the stacks its agents' harnesses may name, beside the
	// built-in reference agent.
	Stacks stack.Set
}

// OracleCondition is the condition of troupe run --oracle (Harbor's oracle
// agent): each task's solution/solve.sh in place of a team (trial.Spec's
// Oracle).
func OracleCondition() Condition {
	return Condition{Path: trial.OracleManifestPath, Team: trial.OracleTeam(), Oracle: true}
}

// Spec is what `troupe run` was asked to do.
type Spec struct {
	Dir         string
	Conditions  []Condition
	Tasks       []*task.Task
	Attempts    int
	Concurrency int
	// Retries is how many times an unscored_infra trial is run again.
	Retries int
	// Command is the command line, recorded in config.json.
	Command []string
	// Replay makes every trial a replay of a recorded one (troupe replay).
	Replay *trial.Replay
	// Sequential runs the job in rounds until its conditions are decided
	// (troupe run --until-decided); Attempts bounds the rounds.
	Sequential *Sequential
	// HostPaths are the host paths the tasks may bind (--allow-host-path):
	// a task binding another is refused by the plan, before any trial.
	HostPaths trial.HostPaths
}

// CheckStacks resolves the stack each roster entry's harness names and
// checks its definition and files against their digests (stack.Verify)
// and the programs it starts, the agent a bridge hosts among them
// (stack.CheckPrograms), each stack once: every problem (each file's its own), as located errors
// at the harness of the first entry that names the stack
// (roster[i].harness).
func CheckStacks(m *manifest.Manifest, stacks stack.Set) error {
	return checkStacks(m, stacks, func(st *stack.Stack) error {
		files, err := st.Verify()
		if err != nil {
			return err
		}
		_, err = st.CheckPrograms(files)
		return err
	})
}

// ResolveStacks is CheckStacks without reading any file: each harness
// names a stack, and each stack's definition passes stack.Check.
func ResolveStacks(m *manifest.Manifest, stacks stack.Set) error {
	return checkStacks(m, stacks, (*stack.Stack).Check)
}

func checkStacks(m *manifest.Manifest, stacks stack.Set, check func(*stack.Stack) error) error {
	var errs []*located.Error
	checked := map[string]bool{}
	for i, c := range m.Roster {
		add := func(err error) {
			list := []error{err}
			if joined, ok := err.(interface{ Unwrap() []error }); ok {
				list = joined.Unwrap()
			}
			for _, err := range list {
				errs = append(errs, &located.Error{File: m.File(), Path: yaml11.Key(yaml11.Index("roster", i), "harness"), Err: err})
			}
		}
		st, err := stacks.Resolve(string(c.Harness))
		if err != nil {
			add(err)
			continue
		}
		if !checked[st.Name] {
			checked[st.Name] = true
			if err := check(st); err != nil {
				add(err)
			}
		}
	}
	return located.Join(errs...)
}

// CheckConditionName refuses a condition that cannot name trial folders
// and relay channels ("<task>__<condition>__<attempt>"), located at the
// manifest's condition.
func CheckConditionName(m *manifest.Manifest) error {
	if err := checkFolderName(m.Condition); err != nil {
		return located.Join(&located.Error{File: m.File(), Path: "condition", Err: err})
	}
	return nil
}

// DefaultDir names a job after its inputs, the paths of its manifests
// (trial.OracleManifestPath for the oracle) and of its tasks, so that the
// same command finds the same folder and resumes.
func DefaultDir(manifests, tasks []string) string {
	h := sha256.New()
	for _, list := range [][]string{manifests, tasks} {
		var abs []string
		for _, p := range list {
			a, err := filepath.Abs(p)
			if err != nil {
				a = p
			}
			abs = append(abs, a)
		}
		slices.Sort(abs)
		fmt.Fprintf(h, "%s\x00", strings.Join(abs, "\x00"))
	}
	return filepath.Join("jobs", "job-"+hex.EncodeToString(h.Sum(nil))[:12])
}
