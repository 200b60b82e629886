package job

import (
	"time"

	"github.com/troupebench/troupe/trial"
)

// Job event types, besides the trials' own (trial.Event).
const (
	EventStarted  = "job_started"
	EventFinished = "job_finished"
	EventRetry    = "trial_retry"
)

// Event is a job-level event: the plan at the start, a retry, the totals
// at the end. Trials' events come as trial.Event.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Dir     string    `json:"dir"`
	Total   int       `json:"n_total_trials"`
	Kept    int       `json:"n_kept_trials"`
	Trial   string    `json:"trial,omitempty"`
	Attempt int       `json:"retry,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// Progress receives a job's events; both are called from several
// goroutines, never at once. A nil one receives nothing.
type Progress struct {
	Trial func(trial.Event)
	Job   func(Event)
}

// orNothing is p with a function that does nothing for each nil one.
func (p Progress) orNothing() Progress {
	if p.Trial == nil {
		p.Trial = func(trial.Event) {}
	}
	if p.Job == nil {
		p.Job = func(Event) {}
	}
	return p
}
