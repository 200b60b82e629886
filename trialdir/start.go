package trialdir

import (
	"encoding/json"
	"fmt"
	"io"
)

// TrialStart is a trial's config.json (Config): what the trial was asked
// to run, written when it starts, so that troupe view can show a trial
// that has no result.json yet. Its fields are declared in the order of
// their names: the file was a map's, and its bytes have not changed.
type TrialStart struct {
	AgentUser string        `json:"agent_user"`
	Attempt   int           `json:"attempt"`
	ID        string        `json:"id"`
	JobID     string        `json:"job_id"`
	Manifest  StartManifest `json:"manifest"`
	Task      StartTask     `json:"task"`
	// Timeouts are the phase limits the trial runs with, in seconds.
	Timeouts  map[string]float64 `json:"timeouts"`
	TrialName string             `json:"trial_name"`
	Version   string             `json:"troupe_version"`
}

// StartManifest is the manifest a trial runs: its path, its condition and
// its hash.
type StartManifest struct {
	Condition string `json:"condition"`
	Path      string `json:"path"`
	SHA256    string `json:"sha256"`
}

// StartTask is the task a trial runs: its checksum, name and folder.
type StartTask struct {
	Checksum string `json:"checksum"`
	Name     string `json:"name"`
	Path     string `json:"path"`
}

// DecodeStart reads a trial's config.json from r; its caller bounds r.
func DecodeStart(r io.Reader) (*TrialStart, error) {
	var s TrialStart
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", Config, err)
	}
	return &s, nil
}
