package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/troupebench/troupe/trial/outcome"

	"github.com/troupebench/troupe/trial"
)

// A retried trial counts once: its first run's unscored_infra is replaced
// by its last outcome, and the bar never passes the total.
func TestProgressCountsARetriedTrialOnce(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&app{stderr: &out}, false)
	p.terminal = true
	p.job(trial.JobEvent{Type: trial.EventJobStarted, Dir: "jobs/x", Total: 1})
	p.trial(trial.Event{Type: trial.EventStarted, Trial: "a"})
	p.trial(trial.Event{Type: trial.EventFinished, Trial: "a", Outcome: outcome.UnscoredInfra})
	p.job(trial.JobEvent{Type: trial.EventRetry, Trial: "a", Attempt: 1})
	p.trial(trial.Event{Type: trial.EventStarted, Trial: "a"})
	p.trial(trial.Event{Type: trial.EventFinished, Trial: "a", Outcome: outcome.Passed})
	last := out.String()[strings.LastIndex(out.String(), "\r\033[K"):]
	if !strings.Contains(last, "[########################] 1/1 done · 0 running · 0 not passed") {
		t.Errorf("last progress line %q", last)
	}
}
