package decide

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Method names the sequential test and its version in every record: a
// record replays only under the method that wrote it. Version 1 sized its
// bets from the mean seen so far (aGRAPA); version 2 sizes them for the
// difference Delta, as Wald's test does (see Test).
const Method = "betting-cs/2"

// Citation is the source of the confidence sequence and of its bets, for
// outputs.
const Citation = "Waudby-Smith and Ramdas (2023), Estimating means of bounded random variables by betting, J. R. Stat. Soc. B 86(1), 1–27; bets sized for Δ as in Wald's (1945) sequential probability ratio test"

// maxBet bounds every bet: with λ ≤ 1/2, each factor 1 + λ(d − m) stays
// at or above 0 for every d and m in [−1, 1], which validity needs.
const maxBet = 0.5

// priorPairs is the weight, in pairs, of the prior discordance
// (Params.PriorVariance + Δ²) in the discordance that sizes the bets: one
// pair, so that the rounds' own discordance takes over from the first.
const priorPairs = 1

// Errors a Test's Add returns, wrapped with the round.
var (
	// ErrRoundSeen is a round added before: adding it again would look
	// at its data twice.
	ErrRoundSeen = errors.New("round already added")
	// ErrRoundSkipped is a round after the next one: rounds are added
	// in order, each once.
	ErrRoundSkipped = errors.New("round skipped")
	// ErrEnded is a round added to a test that has decided, or run its
	// MaxRounds: its decision is final.
	ErrEnded = errors.New("the test has ended")
)

// Verdict is what a sequential test concluded about the condition against
// the baseline.
type Verdict string

const (
	// Undecided: not yet, or not within MaxRounds.
	Undecided Verdict = "undecided"
	// Better: the condition's pass rate is higher (the sequence is above 0).
	Better Verdict = "better"
	// Worse: it is lower (the sequence is below 0).
	Worse Verdict = "worse"
	// Equivalent: the difference is within ±Delta (the sequence is
	// inside it). Better and Worse take precedence: a sequence inside
	// (0, Delta) is Better, by less than Delta.
	Equivalent Verdict = "equivalent"
	// NotBetter: a difference of Delta or more is ruled out, at the
	// looser level Params.Futility: the condition is not worth more
	// trials. Only a test with a Futility level gives it, and it is the
	// weaker claim: it says nothing of worse or equivalent.
	NotBetter Verdict = "not_better"
)

// Interval is an open interval (Low, High) of the mean paired difference.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Params are a sequential test's settings, fixed before its first round
// and recorded with its decision.
type Params struct {
	// Alpha bounds the chance of any false decision over the whole
	// sequence, however many rounds are looked at: better or worse when
	// the two are equal, equivalent when they differ by Delta or more,
	// worse when the condition is better, and so on.
	Alpha float64 `json:"alpha"`
	// Delta is the margin: within ±Delta is Equivalent. It is also the
	// difference the bets are sized for (the design alternative): the
	// test is quickest, relative to a fixed design, near it and above.
	Delta float64 `json:"delta"`
	// MaxRounds ends the test, undecided, after that many rounds.
	MaxRounds int `json:"max_rounds"`
	// FixedRounds is how many rounds the fixed design would run
	// (PlanRounds), to say what stopping early saved; 0 when unknown.
	FixedRounds int `json:"fixed_rounds,omitempty"`
	// Futility, when above 0, is the level β of a futility stop: the
	// test also ends, NotBetter, once a difference of Delta or more is
	// ruled out at level β (its own capital, K⁻(Δ), reaching 1/β). It is
	// the lower boundary of Wald's test, and what makes the test quick
	// at a difference of Delta: set it to 1 − the plan's power. Worse and
	// Equivalent, which need level α, then rarely come first. 0 turns it
	// off.
	Futility float64 `json:"futility,omitempty"`
	// PriorVariance is a guess of a pair's variance (a plan's
	// Variance.Total): it sizes the first round's bets, and then weighs
	// as one pair against the rounds' own pairs. 0, or more than 1, means
	// 1, the most a difference in [−1, 1] can have. No value makes the
	// test invalid: a poor guess costs rounds, not errors.
	PriorVariance float64 `json:"prior_variance,omitempty"`
}

// Validate says what is wrong with the settings, all at once.
func (p Params) Validate() error {
	var errs []error
	if !(p.Alpha > 0 && p.Alpha < 1) {
		errs = append(errs, fmt.Errorf("the level α, %v, is not in (0, 1)", p.Alpha))
	}
	if !(p.Delta > 0 && p.Delta < 1) {
		errs = append(errs, fmt.Errorf("the margin Δ, %v, is not in (0, 1)", p.Delta))
	}
	if p.MaxRounds < 1 {
		errs = append(errs, fmt.Errorf("at most %d rounds: a test needs one", p.MaxRounds))
	}
	if p.FixedRounds < 0 {
		errs = append(errs, fmt.Errorf("fixed design of %d rounds", p.FixedRounds))
	}
	if !(p.Futility >= 0 && p.Futility < 1) {
		errs = append(errs, fmt.Errorf("futility level %v is not in [0, 1)", p.Futility))
	}
	if !(p.PriorVariance >= 0) || math.IsInf(p.PriorVariance, 0) {
		errs = append(errs, fmt.Errorf("prior variance %v is not a variance", p.PriorVariance))
	}
	return errors.Join(errs...)
}

// Round is one round's paired results, with the bets the test placed on
// it before it was seen (BetUp by the gambler on a higher mean, K⁺,
// BetDown on a lower one, K⁻; equal under betting-cs/2): recorded so that
// a reader can check the arithmetic.
type Round struct {
	Round int `json:"round"`
	Pairs
	BetUp   float64 `json:"bet_up"`
	BetDown float64 `json:"bet_down"`
}

// Test is the sequential test of one condition against the baseline on a
// job's tasks, round by round.
//
// It keeps a confidence sequence for δ, the mean over the job's tasks of
// the difference in pass probability (condition − baseline), built by
// betting (Waudby-Smith and Ramdas 2023; Shafer and Vovk's testing by
// betting, surveyed by Ramdas, Grünwald, Vovk and Shafer 2023). For a
// candidate mean m, two gamblers bet on each pair's difference d ∈
// {−1, 0, 1}: one wins if δ > m, with capital K⁺(m) = ∏ (1 + λ⁺(d − m)),
// the other if δ < m, with K⁻(m) = ∏ (1 − λ⁻(d − m)). Each round's two
// bets are fixed before the round, from the rounds before it, and are the
// same for every pair of the round.
//
// Validity. Given the rounds before, the pairs of a round are independent
// (trials are independent given their task), pair t with mean δₜ, so the
// round's factor for K⁺(m) has expectation ∏ₜ (1 + λ(δₜ − m)). Each term
// is at least 1 − 2λ ≥ 0, so by the inequality of arithmetic and
// geometric means that expectation is at most (1 + λ(δ − m))^N, with δ
// the mean of the δₜ, which is at most 1 when δ ≤ m. So K⁺(m) is a
// nonnegative supermartingale over rounds whenever δ ≤ m, however the
// tasks differ (the null is about their mean, not each task's), and
// likewise K⁻(m) whenever δ ≥ m. By Ville's inequality (Ville 1939) each
// reaches c at any round, ever, with probability at most 1/c. The one bet
// a round is what the argument needs: bets that differed between the
// pairs of a round would weigh the tasks unequally, and the product would
// then be a supermartingale only for a weighted mean.
//
// The sequence at round r is the m that neither K⁺(m) nor K⁻(m) has
// driven to 2/α at any round so far. The bets do not depend on m, so
// K⁺(m) falls as m rises and K⁻(m) rises, and the sequence is an
// interval (Low, High), found by bisection; δ leaves it, ever, with
// probability at most α. The test decides Better when Low ≥ 0 (K⁺(0)
// reached 2/α), Worse when High ≤ 0, Equivalent when −Δ ≤ Low and
// High ≤ Δ; each is false only if δ left the sequence, so the chance
// that any of them is false is at most α, whatever δ is and whenever the
// job looks (at δ = 0, Better and Worse each at most α/2). With a
// Futility level β it also stops NotBetter when K⁻(Δ) reaches 1/β, which
// happens with probability at most β when δ ≥ Δ.
//
// The bets. Both are λ = min(1/2, Δ/q), with q the share of discordant
// pairs (d ≠ 0) so far, counting one pseudo-pair of the prior
// discordance PriorVariance + Δ². That is the growth-optimal (Kelly) bet
// on K⁺(0) against pairs with discordance q and mean difference Δ, the
// design alternative: its up pairs are u = (q + Δ)/2 and its down pairs
// w = (q − Δ)/2, and λ = (u − w)/(u + w) maximises
// u·log(1 + λ) + w·log(1 − λ). By symmetry it is also the best bet on
// K⁻(0) against a mean of −Δ, and it is nearly the best on K⁻(Δ) and
// K⁺(−Δ) against a mean of 0 (within 2% of their greatest growth for
// q ≥ 0.2 and Δ ≤ 0.2). A round's expected log-capital depends only on
// the shares of up and down pairs over the round, so the bet is as good
// for differing tasks as for alike ones.
//
// With λ fixed, log K⁺(0) is the log likelihood ratio of that
// alternative against its nearest null (each pair's probability divided
// by 1 + λd, which keeps q and makes the mean 0), and K⁻(Δ), betting the
// other way, falls as K⁺(0) rises (their logs nearly cancel, pair by
// pair): the test is, nearly, Wald's (1945) sequential probability ratio
// test, with 2/α as its upper boundary and 1/β on K⁻(Δ) as its lower
// one, and valid against every null, not only the nearest. Wald's test is the one that needs the fewest pairs on average
// at both Δ and 0 for its error rates (Wald and Wolfowitz 1948), when it
// may look after every pair; a job looks once a round, which costs it
// part of that saving (docs/compare.md has the figures). Only the
// discordance, which says nothing of the direction, is estimated:
// chasing the mean seen so far (version 1) bets too much after a lucky
// round, and a bet fixed by the plan alone is slow when the plan's
// variance is wrong.
//
// Why each pair and not the round's mean over tasks: that mean lies in
// [−1, 1] but varies little (its spread falls as 1/√N), and a bet on a
// variable that could be −1 can be at most about 1, so its capital grows
// by about λΔ a round. Betting on each pair, with one bet a round, grows
// N times faster under the same independence.
type Test struct {
	params    Params
	rounds    []Round
	low, high float64
	verdict   Verdict
	decidedAt int
	// The pairs so far and how many of them were discordant, for the
	// next bets.
	n, discordant float64
}

// NewTest starts a sequential test.
func NewTest(p Params) (*Test, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Test{params: p, low: -1, high: 1, verdict: Undecided}, nil
}

// Params are the test's settings.
func (t *Test) Params() Params { return t.params }

// Rounds is how many rounds have been added.
func (t *Test) Rounds() int { return len(t.rounds) }

// Pairs is how many pairs have been added, over every round.
func (t *Test) Pairs() int { return int(t.n) }

// Ended says whether the test has decided or run its MaxRounds: its
// condition needs no more trials.
func (t *Test) Ended() bool {
	return t.verdict != Undecided || len(t.rounds) >= t.params.MaxRounds
}

// Decision is a test's state for a reader.
type Decision struct {
	Verdict Verdict `json:"verdict"`
	// Round is the round that decided; 0 while undecided.
	Round int `json:"round,omitempty"`
	// Ended: decided, or undecided after MaxRounds.
	Ended bool `json:"ended"`
	// Interval is the anytime-valid 1 − α interval for the mean paired
	// difference after the last round, (−1, 1) before any.
	Interval Interval `json:"interval"`
	// Rounds and Pairs are what the test has used.
	Rounds int `json:"rounds"`
	Pairs  int `json:"pairs"`
	// SavedRounds is the fixed design's rounds less the rounds used, once
	// the test has ended and when FixedRounds is known (negative when it
	// took more).
	SavedRounds *int `json:"saved_rounds,omitempty"`
}

// Decision says where the test stands.
func (t *Test) Decision() Decision {
	d := Decision{Verdict: t.verdict, Round: t.decidedAt, Ended: t.Ended(),
		Interval: Interval{t.low, t.high}, Rounds: len(t.rounds), Pairs: t.Pairs()}
	if d.Ended && t.params.FixedRounds > 0 {
		saved := t.params.FixedRounds - len(t.rounds)
		d.SavedRounds = &saved
	}
	return d
}

// Bets are the bets the next round will get: fixed by the rounds so far.
// Both are Δ/q, at most 1/2, with q the discordance so far (see Test).
func (t *Test) Bets() (up, down float64) {
	v := t.params.PriorVariance
	if v == 0 || v > 1 {
		v = 1
	}
	d := t.params.Delta
	prior := math.Min(1, v+d*d)
	q := (priorPairs*prior + t.discordant) / (priorPairs + t.n)
	bet := math.Min(maxBet, d/q)
	return bet, bet
}

// Add folds in round number round's pairs (one per task that both
// conditions scored in the round) and returns the decision after it.
// Rounds are numbered from 1 and added in order, each once: a round seen
// before is ErrRoundSeen, so a resumed job cannot look at a round twice.
// Pairs lost to infrastructure failures are left out of a round. Which
// pairs are lost must not depend on their outcome; the guarantee is then
// about the mean over the tasks each round scored (the argument in Test,
// round by round), close to the mean over all of them when losses are
// few, and without a task that never scores.
func (t *Test) Add(round int, p Pairs) (Decision, error) {
	switch next := len(t.rounds) + 1; {
	case t.Ended():
		return t.Decision(), fmt.Errorf("round %d: %w (%s after round %d)", round, ErrEnded, t.verdict, len(t.rounds))
	case round < next:
		return t.Decision(), fmt.Errorf("round %d: %w (next is %d)", round, ErrRoundSeen, next)
	case round > next:
		return t.Decision(), fmt.Errorf("round %d: %w (next is %d)", round, ErrRoundSkipped, next)
	}
	if err := p.valid(); err != nil {
		return t.Decision(), fmt.Errorf("round %d: %w", round, err)
	}
	up, down := t.Bets()
	t.rounds = append(t.rounds, Round{Round: round, Pairs: p, BetUp: up, BetDown: down})
	t.n += float64(p.N())
	t.discordant += float64(p.Up + p.Down)
	t.update()
	return t.Decision(), nil
}

// update narrows the interval with the capitals after the last round and
// decides.
func (t *Test) update() {
	threshold := math.Log(2 / t.params.Alpha)
	up := func(m float64) bool { v, _ := t.logCapital(+1, m); return v >= threshold }
	down := func(m float64) bool { v, _ := t.logCapital(-1, m); return v >= threshold }
	// The decision points are tested exactly, so that a decision never
	// rests on the root finder's last digit.
	d := t.params.Delta
	for _, m := range []float64{-d, 0, d} {
		if up(m) {
			t.low = math.Max(t.low, m)
		}
		if down(m) {
			t.high = math.Min(t.high, m)
		}
	}
	// K⁺ falls with m: the m it rejects are [−1, ℓ], and the bound moves
	// only if it rejects the bound so far. It never rejects 1 (every
	// factor is then at most 1), nor K⁻ −1.
	if up(t.low) {
		t.low = math.Max(t.low, t.edge(+1, threshold, t.low, 1))
	}
	if down(t.high) {
		t.high = math.Min(t.high, t.edge(-1, threshold, t.high, -1))
	}
	switch {
	case t.low >= 0:
		t.verdict = Better
	case t.high <= 0:
		t.verdict = Worse
	case t.low >= -d && t.high <= d:
		t.verdict = Equivalent
	case t.params.Futility > 0:
		if v, _ := t.logCapital(-1, d); v >= math.Log(1/t.params.Futility) {
			t.verdict = NotBetter
		}
	}
	if t.verdict != Undecided {
		t.decidedAt = len(t.rounds)
	}
}

// edge is the end of the m that capital K⁺ (sign +1) or K⁻ (sign −1)
// rejects at the threshold, from one m it rejects (in) and one it does
// not (out): an m it rejects, within 1e-9 of the end. log K is concave in
// m, so Newton's method, kept inside the bracket by bisection, gets there
// in a few steps where bisection alone takes about 30.
func (t *Test) edge(sign, threshold, in, out float64) float64 {
	x := in
	for range 200 {
		if math.Abs(out-in) <= 1e-9 {
			break
		}
		v, dv := t.logCapital(sign, x)
		if v >= threshold {
			in = x
		} else {
			out = x
		}
		next := x - (v-threshold)/dv
		if math.Abs(next-x) < 1e-12 {
			// At the end to rounding: step just across it, so that the
			// bracket closes.
			toward := out
			if x == out {
				toward = in
			}
			next = x + math.Copysign(5e-10, toward-x)
		}
		if !((next-in)*(next-out) < 0) { // outside the bracket, or NaN
			next = (in + out) / 2
		}
		x = next
	}
	return in
}

// logCapital is log K(m) after the rounds so far, and its derivative in
// m: K⁺ for sign +1, K⁻ for sign −1, K(m) = ∏ (1 + b(d − m)) with
// b = λ⁺ or −λ⁻.
func (t *Test) logCapital(sign, m float64) (v, dv float64) {
	for _, r := range t.rounds {
		b := r.BetUp
		if sign < 0 {
			b = -r.BetDown
		}
		for _, c := range [3]struct {
			n int
			d float64
		}{{r.Up, 1}, {r.Same, 0}, {r.Down, -1}} {
			if c.n == 0 {
				continue // 0, even where the factor is 0
			}
			x := b * (c.d - m)
			v += float64(c.n) * math.Log1p(x)
			dv -= float64(c.n) * b / (1 + x)
		}
	}
	return v, dv
}

// record is a Test as JSON: its method and settings, its rounds, and the
// decision they led to. The decision is derived, and checked on restore.
type record struct {
	Method string `json:"method"`
	Params
	Rounds   []Round  `json:"rounds"`
	Decision Decision `json:"decision"`
}

// MarshalJSON records the test: restored, it replays its rounds.
func (t *Test) MarshalJSON() ([]byte, error) {
	rounds := t.rounds
	if rounds == nil {
		rounds = []Round{}
	}
	return json.Marshal(record{Method: Method, Params: t.params, Rounds: rounds, Decision: t.Decision()})
}

// UnmarshalJSON restores a test by replaying its rounds under its
// settings; a record that does not replay to its own bets and decision
// (another method, or an edited file) is refused rather than continued:
// the sequence's guarantee holds only for bets fixed before each round.
func (t *Test) UnmarshalJSON(data []byte) error {
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return err
	}
	if rec.Method != Method {
		return fmt.Errorf("sequential test method %q: this troupe replays %q", rec.Method, Method)
	}
	fresh, err := NewTest(rec.Params)
	if err != nil {
		return fmt.Errorf("sequential test settings: %w", err)
	}
	for _, r := range rec.Rounds {
		up, down := fresh.Bets()
		if !closeTo(up, r.BetUp) || !closeTo(down, r.BetDown) {
			return fmt.Errorf("sequential test round %d does not replay: recorded bets %v, %v, the method's %v, %v", r.Round, r.BetUp, r.BetDown, up, down)
		}
		if _, err := fresh.Add(r.Round, r.Pairs); err != nil {
			return fmt.Errorf("sequential test: %w", err)
		}
	}
	got := fresh.Decision()
	if got.Verdict != rec.Decision.Verdict || got.Round != rec.Decision.Round {
		return fmt.Errorf("sequential test does not replay: its rounds give %s at round %d, the record says %s at round %d",
			got.Verdict, got.Round, rec.Decision.Verdict, rec.Decision.Round)
	}
	*t = *fresh
	return nil
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(a)) }
