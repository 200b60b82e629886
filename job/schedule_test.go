package job

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSchedule is a schedule of rounds given by name; completed fails at
// round failAt.
type fakeSchedule struct {
	rounds [][]*PlanTrial
	failAt int
	looked []int
	ended  bool
}

func (s *fakeSchedule) round(r int) ([]*PlanTrial, bool) {
	if r > len(s.rounds) {
		return nil, false
	}
	return s.rounds[r-1], true
}

func (s *fakeSchedule) completed(r int) error {
	if r == s.failAt {
		return errors.New("the look failed")
	}
	s.looked = append(s.looked, r)
	return nil
}

func (s *fakeSchedule) end() { s.ended = true }

// TestTheSchedulingLoop: the one loop both kinds of job run. It launches
// each round's trials at most the concurrency at once and tells the
// schedule which rounds completed; a trial whose result cannot be written
// stops the launching while the running trials finish; a cancelled job
// stops launching, and its round is not complete; a look that fails ends
// the job.
func TestTheSchedulingLoop(t *testing.T) {
	for _, c := range []struct {
		name        string
		concurrency int
		rounds      string // rounds split by "|", trials by ","
		failAt      int    // the round whose look fails
		// A trial named fail* cannot write its result; wait* ends once one
		// has failed; cancel* cancels the job.
		ran    string
		looked []int
		ended  bool
		err    string
	}{
		{name: "a fixed job: one round", concurrency: 2, rounds: "a,b,c,d,e", ran: "a,b,c,d,e", looked: []int{1}, ended: true},
		{name: "rounds, one with nothing to run", concurrency: 3, rounds: "a,b||c,d", ran: "a,b,c,d", looked: []int{1, 2, 3}, ended: true},
		{name: "a result not written", concurrency: 1, rounds: "a,fail,b|c", ran: "a,fail", err: "cannot write"},
		{name: "the running trials finish", concurrency: 2, rounds: "wait,fail,b,c", ran: "wait,fail", err: "cannot write"},
		{name: "cancelled", concurrency: 1, rounds: "a,cancel,b|c", ran: "a,cancel", ended: true},
		{name: "a look that fails", concurrency: 2, rounds: "a,b|c", failAt: 1, ran: "a,b", err: "the look failed"},
	} {
		// In a bubble: a trial that finishes once the failure is recorded
		// waits for every other goroutine to be blocked (synctest.Wait).
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				s := &fakeSchedule{failAt: c.failAt}
				for round := range strings.SplitSeq(c.rounds, "|") {
					var trials []*PlanTrial
					for name := range strings.SplitSeq(round, ",") {
						if name != "" {
							trials = append(trials, &PlanTrial{Name: name})
						}
					}
					s.rounds = append(s.rounds, trials)
				}
				var mu sync.Mutex
				var ran []string
				running, most := 0, 0
				// A failing trial beside a waiting one fails once that one
				// started: a trial launched but not started when the job stops
				// launching never starts. The waiting one ends once the
				// failure is recorded: were it to end first, its slot would let
				// one more trial start.
				failed, waiting := make(chan struct{}), make(chan struct{})
				if !strings.Contains(c.rounds, "wait") {
					close(waiting)
				}
				r := &runner{plan: &Plan{Concurrency: c.concurrency}}
				r.runOne = func(ctx context.Context, p *PlanTrial) error {
					mu.Lock()
					ran = append(ran, p.Name)
					running++
					most = max(most, running)
					mu.Unlock()
					defer func() {
						mu.Lock()
						running--
						mu.Unlock()
					}()
					switch {
					case strings.HasPrefix(p.Name, "fail"):
						<-waiting
						close(failed)
						return errors.New("cannot write the result")
					case strings.HasPrefix(p.Name, "wait"):
						close(waiting)
						select {
						case <-failed:
						case <-time.After(10 * time.Second):
							t.Error("the failing trial never ran beside this one")
						}
						synctest.Wait()
					case strings.HasPrefix(p.Name, "cancel"):
						cancel()
					}
					return nil
				}
				err := r.walk(ctx, s)
				if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
					t.Errorf("error %v, want %q", err, c.err)
				}
				slices.Sort(ran)
				want := strings.Split(c.ran, ",")
				slices.Sort(want)
				if !slices.Equal(ran, want) {
					t.Errorf("ran %v, want %v", ran, want)
				}
				if most > c.concurrency {
					t.Errorf("%d trials ran at once, at most %d may", most, c.concurrency)
				}
				if !slices.Equal(s.looked, c.looked) || s.ended != c.ended {
					t.Errorf("rounds completed %v, ended %v; want %v, %v", s.looked, s.ended, c.looked, c.ended)
				}
			})
		})
	}
}
