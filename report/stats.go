package report

import (
	"math"
	"math/rand/v2"
	"slices"
)

// z95 is the standard normal quantile for a two-sided 95% interval.
const z95 = 1.959963984540054

// Interval is a confidence interval.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Wilson is the Wilson score 95% interval for successes out of n
// (Newcombe 1998, method 3): unlike the normal approximation it stays in
// [0, 1] and behaves at 0 and n successes, which small benchmark samples hit.
// n = 0 gives no interval (NaN bounds): nothing was measured, and [0, 1]
// would read as a measurement.
func Wilson(successes, n int) Interval {
	if n <= 0 {
		return Interval{math.NaN(), math.NaN()}
	}
	p := float64(successes) / float64(n)
	nf := float64(n)
	z2 := z95 * z95
	center := (p + z2/(2*nf)) / (1 + z2/nf)
	half := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / (1 + z2/nf)
	in := Interval{math.Max(0, center-half), math.Min(1, center+half)}
	// At all or no passes the bound is exactly 1 or 0 (center and half
	// are then equal, and their sum is (1+z²/n)/(1+z²/n)); floating
	// point would print 99.99…% for "every trial passed".
	if successes >= n {
		in.High = 1
	}
	if successes <= 0 {
		in.Low = 0
	}
	return in
}

// PassAtK is the unbiased estimator of pass@k from n attempts of which c
// passed (Chen et al. 2021, "Evaluating Large Language Models Trained on
// Code"): 1 - C(n-c, k) / C(n, k), computed as a product so it does not
// overflow. It is undefined (ok false) when k > n.
func PassAtK(n, c, k int) (float64, bool) {
	if k <= 0 || k > n || c < 0 || c > n {
		return 0, false
	}
	if n-c < k {
		return 1, true
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod, true
}

// McNemarExact is the two-sided exact McNemar test's p-value for paired
// binary outcomes: b pairs where only the first condition passed, c where
// only the second did. Under the null each discordant pair is a fair coin,
// so p = min(1, 2 P(X <= min(b, c))) with X ~ Binomial(b+c, 1/2).
func McNemarExact(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	k := min(b, c)
	// Sum binomial probabilities in log space: n may be thousands.
	sum := 0.0
	for i := 0; i <= k; i++ {
		sum += math.Exp(logChoose(n, i) - float64(n)*math.Ln2)
	}
	return math.Min(1, 2*sum)
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// BootstrapSeed and BootstrapResamples are fixed and stated in every
// comparison, so that a report is reproducible to the digit.
const (
	BootstrapSeed      = 20261130
	BootstrapResamples = 10000
)

// PairedBootstrap is the percentile 95% interval of the mean of paired
// differences (one value per pair, e.g. passed(B) - passed(A) on the same
// task and attempt), from resamples of the pairs with a fixed seed.
func PairedBootstrap(diffs []float64, resamples int, seed uint64) Interval {
	return BootstrapMean(diffs, resamples, seed)
}

// BootstrapMean is the percentile 95% interval of the mean of values, from
// resamples with a fixed seed; NaN bounds with no value. It is the cost
// axis's interval: costs are skewed and few, so no normal approximation.
// With one value, or all equal, it has no width: a handful of trials
// shows less spread than there is, which the pass-rate interval beside it
// does not hide.
func BootstrapMean(values []float64, resamples int, seed uint64) Interval {
	if len(values) == 0 || resamples <= 0 {
		return Interval{math.NaN(), math.NaN()}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	means := make([]float64, resamples)
	n := len(values)
	for r := range means {
		total := 0.0
		for range n {
			total += values[rng.IntN(n)]
		}
		means[r] = total / float64(n)
	}
	slices.Sort(means)
	return Interval{quantile(means, 0.025), quantile(means, 0.975)}
}

// quantile of sorted values, linearly interpolated (type 7, as R and NumPy
// do by default).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return sorted[lo] + (pos-float64(lo))*(sorted[hi]-sorted[lo])
}

// median of values (not necessarily sorted).
func median(values []float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	return quantile(slices.Sorted(slices.Values(values)), 0.5)
}

// mean of values; NaN with none.
func mean(values []float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	return sum(values) / float64(len(values))
}

func sum(values []float64) float64 {
	total := 0.0
	for _, v := range values {
		total += v
	}
	return total
}
