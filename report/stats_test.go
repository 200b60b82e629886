package report

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// Newcombe (1998), "Two-sided confidence intervals for the single
// proportion: comparison of seven methods", Statistics in Medicine 17,
// Table II, method 3 (Wilson score, without continuity correction).
func TestWilsonAgainstNewcombe(t *testing.T) {
	for _, c := range []struct {
		x, n      int
		low, high float64
	}{
		{81, 263, 0.2553, 0.3662},
		{15, 148, 0.0624, 0.1605},
		{0, 20, 0.0000, 0.1611},
		{1, 29, 0.0061, 0.1718},
	} {
		got := Wilson(c.x, c.n)
		if !near(got.Low, c.low, 0.00006) || !near(got.High, c.high, 0.00006) {
			t.Errorf("Wilson(%d/%d) = [%.4f, %.4f], want [%.4f, %.4f]", c.x, c.n, got.Low, got.High, c.low, c.high)
		}
	}
	if got := Wilson(0, 0); !math.IsNaN(got.Low) || !math.IsNaN(got.High) {
		t.Errorf("Wilson(0/0) = %v, want no interval (NaN): [0, 1] would read as measured", got)
	}
	if got := Wilson(10, 10); got.High != 1 || got.Low <= 0.69 || got.Low >= 0.73 {
		t.Errorf("Wilson(10/10) = %v", got) // 0.7225 by the formula
	}
}

// At all passes the upper bound is exactly 1, and at none the lower bound
// exactly 0: floating point gave 0.9999999999999999 (n = 14, 16, 27, …)
// and 6.9e-18 (n = 27, 45, …), a bound short of 100% or above 0%.
func TestWilsonExactAtTheEnds(t *testing.T) {
	ns := []int{14, 16, 17, 27, 45, 54, 90, 12345, 99999}
	for n := 1; n <= 300; n++ {
		ns = append(ns, n)
	}
	for _, n := range ns {
		if got := Wilson(n, n); got.High != 1 || !(got.Low > 0 && got.Low < 1) {
			t.Errorf("Wilson(%d/%d) = [%v, %v], want the high bound exactly 1", n, n, got.Low, got.High)
		}
		if got := Wilson(0, n); got.Low != 0 || !(got.High > 0 && got.High < 1) {
			t.Errorf("Wilson(0/%d) = [%v, %v], want the low bound exactly 0", n, got.Low, got.High)
		}
		// The interval is symmetric: k of n and n-k of n mirror each other.
		for _, k := range []int{0, n / 3, n / 2, n} {
			a, b := Wilson(k, n), Wilson(n-k, n)
			if !near(a.Low, 1-b.High, 1e-12) || !near(a.High, 1-b.Low, 1e-12) {
				t.Errorf("Wilson(%d/%d) = %v and Wilson(%d/%d) = %v do not mirror", k, n, a, n-k, n, b)
			}
		}
	}
}

// Chen et al. (2021): pass@k = 1 - C(n-c,k)/C(n,k).
func TestPassAtK(t *testing.T) {
	for _, c := range []struct {
		n, c, k int
		want    float64
	}{
		{5, 1, 1, 0.2},             // pass@1 is the pass rate
		{10, 3, 5, 1 - 21.0/252.0}, // C(7,5)=21, C(10,5)=252
		{200, 10, 1, 0.05},         // the paper's n=200 setting, pass@1
		{200, 10, 100, 0.99922897}, // 1 - C(190,100)/C(200,100), from exact integers
		{4, 4, 2, 1},               // every attempt passed
		{4, 0, 2, 0},               // none did
		{3, 1, 3, 1},               // k = n with one pass
	} {
		got, ok := PassAtK(c.n, c.c, c.k)
		if !ok || !near(got, c.want, 1e-6) {
			t.Errorf("pass@%d(n=%d, c=%d) = %v %v, want %v", c.k, c.n, c.c, got, ok, c.want)
		}
	}
	if _, ok := PassAtK(3, 1, 4); ok {
		t.Error("pass@4 of 3 attempts is defined")
	}
}

// Exact McNemar p-values, as binomial tests on the discordant pairs
// (values as R's binom.test(b, b+c)$p.value gives them).
func TestMcNemarExact(t *testing.T) {
	for _, c := range []struct {
		b, c int
		want float64
	}{
		{1, 9, 0.021484375}, // 2*(1+10)/1024
		{0, 5, 0.0625},      // 2/32
		{3, 3, 1},           // balanced
		{10, 2, 0.0385742},  // 2*(1+12+66)/4096
		{0, 0, 1},           // no discordant pairs
		{40, 60, 0.0569},    // binom.test(40, 100): 0.05689
	} {
		if got := McNemarExact(c.b, c.c); !near(got, c.want, 0.0001) {
			t.Errorf("McNemar(%d, %d) = %.6f, want %.6f", c.b, c.c, got, c.want)
		}
	}
}

func TestPairedBootstrap(t *testing.T) {
	// All pairs differ by +1: the interval is [1, 1].
	if got := PairedBootstrap([]float64{1, 1, 1, 1}, 1000, 1); got.Low != 1 || got.High != 1 {
		t.Errorf("constant differences: %v", got)
	}
	// A known sample: mean 0.2 of 50 pairs (10 of +1, 40 of 0); the
	// percentile interval is close to the normal one, 0.2 ± 1.96*sqrt(.16/50).
	diffs := make([]float64, 50)
	for i := range 10 {
		diffs[i] = 1
	}
	got := PairedBootstrap(diffs, BootstrapResamples, BootstrapSeed)
	if !near(got.Low, 0.2-0.1109, 0.03) || !near(got.High, 0.2+0.1109, 0.03) {
		t.Errorf("interval %v, want about [0.089, 0.311]", got)
	}
	// Fixed seed: the same interval every time.
	if again := PairedBootstrap(diffs, BootstrapResamples, BootstrapSeed); again != got {
		t.Errorf("not reproducible: %v then %v", got, again)
	}
}
