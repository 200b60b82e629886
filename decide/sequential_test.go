package decide

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustTest(t *testing.T, p Params) *Test {
	t.Helper()
	s, err := NewTest(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// randomRounds are rounds of 20 pairs with a difference of about shift.
func randomRounds(seed uint64, n int, shift float64) []Pairs {
	s := spread(20, 0.2, 0.6, shift)
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]Pairs, n)
	for i := range out {
		out[i] = s.round(rng)
	}
	return out
}

// The confidence sequence, its bets and its verdicts against the second
// implementation, round by round, for every verdict.
func TestSequenceAgainstPython(t *testing.T) {
	cases := []struct {
		name   string
		p      Params
		rounds []Pairs
		want   Verdict
	}{
		{"better", Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 40}, randomRounds(1, 40, 0.25), Better},
		{"worse", Params{Alpha: 0.1, Delta: 0.15, MaxRounds: 40, PriorVariance: 0.4}, randomRounds(2, 40, -0.3), Worse},
		{"equivalent", Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 200}, randomRounds(3, 200, 0), Equivalent},
		{"not better", Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 200, Futility: 0.2}, randomRounds(4, 200, 0), NotBetter},
		{"undecided", Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 3}, randomRounds(5, 3, 0.05), Undecided},
	}
	for _, c := range cases {
		s := mustTest(t, c.p)
		var fed []Pairs
		var got []Decision
		for i, p := range c.rounds {
			d, err := s.Add(i+1, p)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			fed, got = append(fed, p), append(got, d)
			if d.Ended {
				break
			}
		}
		if v := s.Decision().Verdict; v != c.want {
			t.Errorf("%s: %s after %d rounds, want %s", c.name, v, s.Rounds(), c.want)
		}
		var want struct {
			Rounds []struct {
				BetUp   float64 `json:"bet_up"`
				BetDown float64 `json:"bet_down"`
				Low     float64 `json:"low"`
				High    float64 `json:"high"`
				Verdict Verdict `json:"verdict"`
			}
		}
		python(t, "seq", map[string]any{"alpha": c.p.Alpha, "delta": c.p.Delta, "futility": c.p.Futility,
			"prior_variance": c.p.PriorVariance, "rounds": fed}, &want)
		for i, w := range want.Rounds {
			r, d := s.rounds[i], got[i]
			if !near(r.BetUp, w.BetUp, 1e-12) || !near(r.BetDown, w.BetDown, 1e-12) {
				t.Errorf("%s round %d: bets %v %v, python %v %v", c.name, i+1, r.BetUp, r.BetDown, w.BetUp, w.BetDown)
			}
			if !near(d.Interval.Low, w.Low, 2e-9) || !near(d.Interval.High, w.High, 2e-9) || d.Verdict != w.Verdict {
				t.Errorf("%s round %d: %v %s, python [%v, %v] %s", c.name, i+1, d.Interval, d.Verdict, w.Low, w.High, w.Verdict)
			}
		}
	}
}

func TestSequenceNarrowsAndContainsTheMean(t *testing.T) {
	s := mustTest(t, Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 100})
	prev := s.Decision().Interval
	if prev != (Interval{-1, 1}) {
		t.Errorf("before any round: %v", prev)
	}
	var all Pairs
	for i, p := range randomRounds(9, 100, 0.05) {
		d, err := s.Add(i+1, p)
		if err != nil {
			t.Fatal(err)
		}
		all = all.Plus(p)
		in := d.Interval
		if in.Low < prev.Low || in.High > prev.High || in.Low >= in.High {
			t.Fatalf("round %d: %v after %v: a sequence only narrows", i+1, in, prev)
		}
		// The mean seen so far is inside: the bounds are far looser than
		// its noise.
		if m := float64(all.Sum()) / float64(all.N()); m <= in.Low || m >= in.High {
			t.Errorf("round %d: mean %v outside %v", i+1, m, in)
		}
		prev = in
		if d.Ended {
			break
		}
	}
}

func TestRoundsInOrderEachOnce(t *testing.T) {
	s := mustTest(t, Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 3})
	if _, err := s.Add(2, Pairs{Up: 1}); !errors.Is(err, ErrRoundSkipped) {
		t.Errorf("round 2 first: %v", err)
	}
	if _, err := s.Add(1, Pairs{Up: 3, Same: 7}); err != nil {
		t.Fatal(err)
	}
	before := s.Decision()
	if _, err := s.Add(1, Pairs{Up: 10}); !errors.Is(err, ErrRoundSeen) || !strings.Contains(err.Error(), "round 1") {
		t.Errorf("round 1 again: %v", err)
	}
	if after := s.Decision(); after != before || s.Pairs() != 10 {
		t.Errorf("a refused round changed the test: %+v then %+v", before, after)
	}
	if _, err := s.Add(2, Pairs{Up: -1}); err == nil {
		t.Error("a negative count is accepted")
	}
	for r := 2; r <= 3; r++ {
		if _, err := s.Add(r, Pairs{Same: 10}); err != nil {
			t.Fatal(err)
		}
	}
	d := s.Decision()
	if !d.Ended || d.Verdict != Undecided || d.Round != 0 || d.Rounds != 3 {
		t.Errorf("after its max: %+v", d)
	}
	if _, err := s.Add(4, Pairs{Same: 10}); !errors.Is(err, ErrEnded) {
		t.Errorf("after its max: %v", err)
	}
	if _, err := NewTest(Params{Alpha: 1, Delta: 0, MaxRounds: 0}); err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Errorf("every mistake at once: %v", err)
	}
}

// A test stopped after some rounds, saved and restored, continues as the
// one never stopped; a record edited, or of another method, is refused.
func TestResumeReplaysTheSameSequence(t *testing.T) {
	p := Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 60, FixedRounds: 20, PriorVariance: 0.4}
	rounds := randomRounds(6, 60, 0.12)
	whole := mustTest(t, p)
	resumed := mustTest(t, p)
	for i, r := range rounds {
		if whole.Ended() {
			break
		}
		want, _ := whole.Add(i+1, r)
		if i == 4 {
			data, err := json.Marshal(resumed)
			if err != nil {
				t.Fatal(err)
			}
			resumed = &Test{}
			if err := json.Unmarshal(data, resumed); err != nil {
				t.Fatalf("restore: %v\n%s", err, data)
			}
			if _, err := resumed.Add(i, rounds[i-1]); !errors.Is(err, ErrRoundSeen) {
				t.Errorf("the restored test takes round %d again: %v", i, err)
			}
		}
		got, err := resumed.Add(i+1, r)
		if err != nil {
			t.Fatal(err)
		}
		if got.Verdict != want.Verdict || got.Interval != want.Interval {
			t.Fatalf("round %d: resumed %+v, whole %+v", i+1, got, want)
		}
	}
	d := whole.Decision()
	if d.Verdict != Better || d.SavedRounds == nil || *d.SavedRounds != 20-d.Rounds {
		t.Errorf("%+v", d)
	}
	data, _ := json.Marshal(whole)
	for _, tc := range []struct{ from, to, why string }{
		{`"up":`, `"up":1`, "does not replay"},          // an edited count changes the bets or the verdict
		{Method, "betting-cs/0", "this troupe replays"}, // another method
		{`"alpha":0.05`, `"alpha":5`, "settings"},       // impossible settings
	} {
		edited := strings.Replace(string(data), tc.from, tc.to, 1)
		if err := json.Unmarshal([]byte(edited), &Test{}); err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s → %s: %v", tc.from, tc.to, err)
		}
	}
	var back map[string]any
	json.Unmarshal(data, &back)
	for _, key := range []string{"method", "alpha", "delta", "max_rounds", "fixed_rounds", "rounds", "decision"} {
		if _, ok := back[key]; !ok {
			t.Errorf("the record lacks %q:\n%s", key, data)
		}
	}
}

// Pairs that never differ never decide better or worse, and in time
// show the two within the margin.
func TestNoDifferenceIsEquivalent(t *testing.T) {
	s := mustTest(t, Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 100})
	r := 0
	for !s.Ended() {
		r++
		if _, err := s.Add(r, Pairs{Same: 50}); err != nil {
			t.Fatal(err)
		}
	}
	d := s.Decision()
	if d.Verdict != Equivalent || d.Interval.Low < -0.1 || d.Interval.High > 0.1 || math.Abs(d.Interval.Low+d.Interval.High) > 1e-6 {
		t.Errorf("%+v", d)
	}
}

// The bets are Kelly's for the design alternative: pairs as discordant as
// those so far (with one pseudo-pair of the prior's), and a mean
// difference of Δ. At most 1/2, whatever the discordance.
func TestBetsAreKellyForDelta(t *testing.T) {
	s := mustTest(t, Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 10, PriorVariance: 0.3})
	if up, down := s.Bets(); !near(up, 0.1/0.31, 1e-15) || up != down {
		t.Errorf("first bets %v %v, want 0.1/(0.3 + 0.1²)", up, down)
	}
	if _, err := s.Add(1, Pairs{Up: 6, Down: 4, Same: 10}); err != nil {
		t.Fatal(err)
	}
	q := (0.31 + 10) / 21
	bet, _ := s.Bets()
	if !near(bet, 0.1/q, 1e-15) {
		t.Errorf("bet %v, want Δ/q = %v", bet, 0.1/q)
	}
	u, w := (q+0.1)/2, (q-0.1)/2
	growth := func(l float64) float64 { return u*math.Log1p(l) + w*math.Log1p(-l) }
	for _, h := range []float64{1e-3, -1e-3} {
		if growth(bet+h) >= growth(bet) {
			t.Errorf("bet %v grows less than %v", bet, bet+h)
		}
	}
	// Pairs that never disagree: Δ/q would be above 1.
	s = mustTest(t, Params{Alpha: 0.05, Delta: 0.1, MaxRounds: 10})
	if _, err := s.Add(1, Pairs{Same: 100}); err != nil {
		t.Fatal(err)
	}
	if bet, _ := s.Bets(); bet != maxBet {
		t.Errorf("bet %v with no discordant pair, want %v", bet, maxBet)
	}
}
