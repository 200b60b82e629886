package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/troupebench/troupe/internal/termsafe"
	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trial/outcome"
)

// progress shows a job as it runs: a live line on a terminal, NDJSON with
// --json, or one line per finished trial otherwise. It writes to standard
// error unescaped, for the live line is drawn with control sequences of its
// own, and escapes every text of the events itself (termsafe): a trial's
// error quotes what its install script, agents or verifier printed.
type progress struct {
	w        io.Writer
	json     *json.Encoder
	terminal bool
	total    int
	kept     int
	running  map[string]bool
	// outcomes is each trial's last outcome: a retried trial counts once.
	outcomes map[string]outcome.Outcome
	cost     modelcall.USD
	drawn    bool
	// warned holds the warnings shown: every trial of a task gives the same.
	warned map[string]bool
}

func newProgress(a *app, asJSON bool) *progress {
	p := &progress{w: a.raw.stderr, running: map[string]bool{}, outcomes: map[string]outcome.Outcome{}, warned: map[string]bool{}}
	if asJSON {
		p.json = json.NewEncoder(a.raw.stdout)
	} else if f, ok := a.raw.stderr.(*os.File); ok {
		if info, err := f.Stat(); err == nil && info.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

func (p *progress) job(e job.Event) {
	if p.json != nil {
		p.json.Encode(e)
		return
	}
	switch e.Type {
	case job.EventStarted:
		p.total, p.kept = e.Total, e.Kept
		kept := ""
		if e.Kept > 0 {
			kept = fmt.Sprintf(" (%d kept from an earlier run)", e.Kept)
		}
		p.line(fmt.Sprintf("job %s: %s%s", e.Dir, count(e.Total, "trial"), kept))
	case job.EventRetry:
		p.line(fmt.Sprintf("retry %d of %s after an infrastructure failure: %s", e.Attempt, e.Trial, indent(e.Error)))
	}
	p.draw()
}

func (p *progress) trial(e trial.Event) {
	if p.json != nil {
		p.json.Encode(e)
		return
	}
	switch e.Type {
	case trial.EventStarted:
		p.running[e.Trial] = true
	case trial.EventWarning:
		if !p.warned[e.Message] {
			p.warned[e.Message] = true
			p.line(fmt.Sprintf("warning: %s: %s", e.Trial, e.Message))
		}
	case trial.EventFinished:
		delete(p.running, e.Trial)
		p.outcomes[e.Trial] = e.Outcome
		p.cost += e.CostUSD
		msg := fmt.Sprintf("%-14s %s (%s)", e.Outcome, e.Trial, e.Reason)
		if e.Error != "" {
			msg += ": " + indent(e.Error)
		}
		p.line(msg)
	}
	p.draw()
}

// line prints a permanent line above the live one, escaped.
func (p *progress) line(s string) {
	if p.terminal && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, termsafe.Escape(s))
	p.drawn = false
}

func (p *progress) draw() {
	if !p.terminal || p.json != nil {
		return
	}
	done, failed := p.kept, 0
	for _, o := range p.outcomes {
		if o != outcome.Cancelled {
			done++
		}
		if o != outcome.Passed {
			failed++
		}
	}
	width := 24
	filled := 0
	if p.total > 0 {
		filled = min(max(width*done/p.total, 0), width)
	}
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %d/%d done · %d running · %d not passed · $%.4f",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, p.total, len(p.running), failed, p.cost)
	p.drawn = true
}

func (p *progress) end() {
	if p.terminal && p.drawn {
		fmt.Fprintln(p.w)
	}
}

// count says "1 trial", "2 trials".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// indent keeps a message whole (its end often says what to do) and indents
// its further lines under the line it starts on.
func indent(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ")
}
