package decide

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// JobFile is where a sequential job (troupe run --until-decided) keeps
// its tests, in its folder, rewritten after each round it looks at: a
// resumed job goes on from it, and troupe compare and troupe view read
// the anytime-valid intervals from it.
const JobFile = "sequential.json"

// JobRecord is a sequential job's tests.
type JobRecord struct {
	Method   string `json:"method"`
	Citation string `json:"citation"`
	Baseline string `json:"baseline"`
	Params   Params `json:"params"`
	// Conditions are the tests, by condition name.
	Conditions map[string]*ConditionRecord `json:"conditions"`
	// Rounds is how many rounds the job has looked at.
	Rounds int `json:"rounds"`
	// TrialsRun counts the job's trials that ran (or were kept);
	// TrialsNotRun those of its plan never run, their condition decided
	// first; FixedDesignTrials what the fixed design (Params.FixedRounds
	// for every condition) would have run, 0 when unknown.
	TrialsRun         int `json:"n_trials_run"`
	TrialsNotRun      int `json:"n_trials_not_run"`
	FixedDesignTrials int `json:"n_fixed_design_trials,omitempty"`
}

// ConditionRecord is one condition's test and where it stands.
type ConditionRecord struct {
	Decision Decision `json:"decision"`
	// DecidedAt is when its verdict was reached; nil while undecided.
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	Test      *Test      `json:"test"`
}

// ReadJob reads a job folder's JobFile; nil and no error when the job
// is not sequential.
func ReadJob(dir string) (*JobRecord, error) {
	file := filepath.Join(dir, JobFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec JobRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for name, c := range rec.Conditions {
		if c == nil || c.Test == nil {
			return nil, fmt.Errorf("%s: condition %s has no test", file, name)
		}
	}
	return &rec, nil
}
