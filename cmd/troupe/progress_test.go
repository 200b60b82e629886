package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trial/outcome"
)

// A retried trial counts once: its first run's unscored_infra is replaced
// by its last outcome, and the bar never passes the total.
func TestProgressCountsARetriedTrialOnce(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(newApp(io.Discard, &out), false)
	p.terminal = true
	p.job(job.Event{Type: job.EventStarted, Dir: "jobs/x", Total: 1})
	p.trial(trial.Event{Type: trial.EventStarted, Trial: "a"})
	p.trial(trial.Event{Type: trial.EventFinished, Trial: "a", Outcome: outcome.UnscoredInfra})
	p.job(job.Event{Type: job.EventRetry, Trial: "a", Attempt: 1})
	p.trial(trial.Event{Type: trial.EventStarted, Trial: "a"})
	p.trial(trial.Event{Type: trial.EventFinished, Trial: "a", Outcome: outcome.Passed})
	last := out.String()[strings.LastIndex(out.String(), "\r\033[K"):]
	if !strings.Contains(last, "[########################] 1/1 done · 0 running · 0 not passed") {
		t.Errorf("last progress line %q", last)
	}
}

// An error is printed whole: its end says what to do.
func TestProgressKeepsTheWholeError(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(newApp(io.Discard, &out), false)
	fix := "fix: build the image with docker build -t my/image environment/ and run again"
	long := strings.Repeat("the engine said something long about the build; ", 6) + "\n" + fix
	p.trial(trial.Event{Type: trial.EventFinished, Trial: "a", Outcome: outcome.UnscoredInfra, Error: long})
	p.job(job.Event{Type: job.EventRetry, Trial: "a", Attempt: 1, Error: long})
	if got := strings.Count(out.String(), fix); got != 2 {
		t.Errorf("the fix is printed %d times, want 2:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "\n    "+fix) {
		t.Errorf("a further line of the error is not indented:\n%s", out.String())
	}
}

// A trial's warning (a limit the engine cannot enforce) is shown before the
// trial ends, once however many trials give it.
func TestProgressShowsEachWarningOnce(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(newApp(io.Discard, &out), false)
	msg := "storage_mb = 64 is not enforced: the engine cannot limit a container's storage"
	for _, name := range []string{"a", "b"} {
		p.trial(trial.Event{Type: trial.EventStarted, Trial: name})
		p.trial(trial.Event{Type: trial.EventWarning, Trial: name, Message: msg})
	}
	if got := strings.Count(out.String(), "warning: a: "+msg); got != 1 || strings.Contains(out.String(), "warning: b:") {
		t.Errorf("the warning is shown %d times (want once, for the first trial):\n%s", got, out.String())
	}
}
