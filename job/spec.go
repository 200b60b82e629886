package job

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

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
}

// CheckStacks resolves the stack of every agent of a team and checks its
// files against their digests, each stack once: every problem, each
// naming its agent.
func CheckStacks(tm *manifest.Team, stacks stack.Set) error {
	var errs []error
	checked := map[string]bool{}
	for _, a := range tm.Agents {
		st, err := stacks.Resolve(string(a.Harness))
		if err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", a.ID, err))
			continue
		}
		if !checked[st.Name] {
			checked[st.Name] = true
			if _, err := st.Verify(); err != nil {
				errs = append(errs, fmt.Errorf("agent %s: %w", a.ID, err))
			}
		}
	}
	return errors.Join(errs...)
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
