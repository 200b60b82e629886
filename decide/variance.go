package decide

import (
	"errors"
	"fmt"
	"math"
)

// ErrNoVariance is a pilot or stated rates whose paired differences do
// not vary: no pair was discordant, so the pilot says nothing about how
// many pairs a difference needs (any plan from it would be one pair).
var ErrNoVariance = errors.New("the paired differences do not vary (no discordant pair): a plan needs a pilot where the two disagree at least once, or stated pass rates")

// Variance is what a plan needs to know of a condition's paired
// differences d (condition − baseline on one (task, attempt), each −1, 0
// or +1), split the way troupe's design samples them: tasks, then
// attempts of each task.
type Variance struct {
	// Within is σ_w², the variance of one pair's difference around its
	// task's mean, averaged over tasks: what more attempts average away.
	Within float64 `json:"within"`
	// Between is σ_b², the variance over tasks of the tasks' mean
	// differences: how much the effect changes from task to task, which
	// only more tasks average away.
	Between float64 `json:"between"`
	// Split says whether Within and Between are known apart (measured by
	// a pilot with two or more attempts of some task, or set by WithICC).
	// When false only their sum is known, and a plan takes whichever
	// split needs more pairs for each design it weighs.
	Split bool `json:"split"`
}

// Total is the variance of one pair's difference, Within + Between.
func (v Variance) Total() float64 { return v.Within + v.Between }

// ICC is the within-task correlation of the paired differences, the share
// of their variance that is between tasks; NaN when it is not known.
func (v Variance) ICC() float64 {
	if !v.Split || v.Total() <= 0 {
		return math.NaN()
	}
	return v.Between / v.Total()
}

// WithICC splits the total variance with a stated within-task
// correlation of the paired differences (0: the effect is the same on
// every task; 1: attempts of a task always agree).
func (v Variance) WithICC(icc float64) (Variance, error) {
	if !(icc >= 0 && icc <= 1) {
		return Variance{}, fmt.Errorf("within-task correlation %v is not in [0, 1]", icc)
	}
	t := v.Total()
	return Variance{Within: (1 - icc) * t, Between: icc * t, Split: true}, nil
}

// EstimateVariance measures the variance of a pilot's paired differences,
// one Pairs per task, by the one-way analysis of variance (method of
// moments, for unequal attempts per task): Within is the pooled variance
// inside tasks, Between the variance of the task means less what Within
// explains of it, at least 0. With one pair per task, only the total is
// known (Split false). Tasks without a pair are left out; a pilot needs
// pairs on two tasks, and a discordant pair.
func EstimateVariance(tasks []Pairs) (Variance, error) {
	var means, inv []float64
	var all Pairs
	ssWithin, dfWithin := 0.0, 0
	for _, p := range tasks {
		if err := p.valid(); err != nil {
			return Variance{}, err
		}
		n := p.N()
		if n == 0 {
			continue
		}
		all = all.Plus(p)
		m := float64(p.Sum()) / float64(n)
		means = append(means, m)
		inv = append(inv, 1/float64(n))
		ssWithin += float64(p.Up+p.Down) - float64(n)*m*m
		dfWithin += n - 1
	}
	if len(means) < 2 {
		return Variance{}, fmt.Errorf("a pilot needs paired results on at least 2 tasks (it has %d)", len(means))
	}
	if all.Up+all.Down == 0 {
		return Variance{}, ErrNoVariance
	}
	if dfWithin == 0 {
		n := float64(all.N())
		m := float64(all.Sum()) / n
		total := (float64(all.Up+all.Down) - n*m*m) / (n - 1)
		return Variance{Within: total}, nil
	}
	within := math.Max(0, ssWithin) / float64(dfWithin)
	between := math.Max(0, sampleVariance(means)-within*meanOf(inv))
	return Variance{Within: within, Between: between, Split: true}, nil
}

// VarianceFromRates is the variance of a pair's difference when the
// baseline passes with probability base and the condition with cand,
// their outcomes on one (task, attempt) independent: (u + w) − (u − w)²
// with u = cand(1 − base), w = base(1 − cand). Outcomes of one task are
// in fact correlated (a hard task is hard for both), which makes the true
// variance smaller: a plan from stated rates errs on the safe side. The
// split between and within tasks is not known (see WithICC).
func VarianceFromRates(base, cand float64) (Variance, error) {
	for _, p := range []float64{base, cand} {
		if !(p >= 0 && p <= 1) {
			return Variance{}, fmt.Errorf("pass rate %v is not in [0, 1]", p)
		}
	}
	u, w := cand*(1-base), base*(1-cand)
	total := u + w - (u-w)*(u-w)
	if total <= 0 {
		return Variance{}, ErrNoVariance
	}
	return Variance{Within: total}, nil
}

func meanOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// sampleVariance divides by n − 1.
func sampleVariance(xs []float64) float64 {
	m := meanOf(xs)
	s := 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return s / float64(len(xs)-1)
}
