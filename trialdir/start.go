package trialdir

import (
	"encoding/json"
	"fmt"
	"io"
)

// TrialStart is a trial's config.json (Config): what the trial was asked
// to run, written when it starts, so that troupe view can show a trial
// that has no result.json yet. It is Harbor's TrialConfig (the same as
// result.json's config), which harbor jobs resume reads back, with
// troupe's fields beside it under the names result.json gives them:
// Harbor ignores those.
type TrialStart struct {
	TrialConfig
	// TrialID is troupe's own id of the trial (result.json's
	// troupe_trial_id); JobID troupe's own id of the job, beside Harbor's
	// job_id (a UUID).
	TrialID string `json:"troupe_trial_id"`
	JobID   string `json:"troupe_job_id"`
	// TaskName is the task folder's name; TaskPath the folder, also for a
	// task of a dataset (whose config.task.path is its path in the
	// repository); TaskChecksum its digest.
	TaskName     string `json:"task_name"`
	TaskPath     string `json:"task_path"`
	TaskChecksum string `json:"task_checksum"`
	// Dataset is where a task of a dataset came from.
	Dataset      *DatasetTask `json:"dataset,omitempty"`
	Attempt      int          `json:"attempt"`
	Condition    string       `json:"condition"`
	ManifestPath string       `json:"manifest_path"`
	ManifestHash string       `json:"manifest_sha256"`
	AgentUser    string       `json:"agent_user"`
	// Timeouts are the phase limits the trial runs with, in seconds.
	Timeouts map[string]float64 `json:"timeouts"`
	Version  string             `json:"troupe_version"`
}

// DecodeStart reads a trial's config.json from r; its caller bounds r.
func DecodeStart(r io.Reader) (*TrialStart, error) {
	var s TrialStart
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", Config, err)
	}
	return &s, nil
}
