package decide

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// Published quantiles: the normal ones as Wichura (1988) and every table
// give them, Student's t as R's qt() prints them (and every t table to
// the digits shown).
func TestQuantilesAgainstPublishedValues(t *testing.T) {
	for _, c := range []struct{ p, want float64 }{
		{0.975, 1.959963984540054},
		{0.8, 0.8416212335729143},
		{0.995, 2.5758293035489004},
		{0.5, 0},
		{0.025, -1.959963984540054},
		{1e-10, -6.361340902404056},
		{0.9999, 3.719016485455709},
	} {
		if got := NormalQuantile(c.p); !near(got, c.want, 1e-12) {
			t.Errorf("NormalQuantile(%v) = %.15g, want %.15g", c.p, got, c.want)
		}
	}
	for _, c := range []struct{ p, df, want float64 }{
		{0.975, 1, 12.7062047},
		{0.975, 2, 4.3026527},
		{0.975, 5, 2.5705818},
		{0.975, 9, 2.2621572},
		{0.975, 10, 2.2281389},
		{0.975, 29, 2.0452296},
		{0.975, 30, 2.0422725},
		{0.975, 120, 1.9799304},
		{0.8, 5, 0.9195438},
		{0.8, 10, 0.8790578},
		{0.995, 5, 4.0321430},
		{0.025, 10, -2.2281389},
	} {
		if got := TQuantile(c.p, c.df); !near(got, c.want, 5e-7) {
			t.Errorf("TQuantile(%v, %v) = %.8f, want %.7f", c.p, c.df, got, c.want)
		}
	}
	if !math.IsNaN(TQuantile(0.5, 0)) || !math.IsNaN(NormalQuantile(1.5)) || TQuantile(1, 3) != math.Inf(1) {
		t.Error("out-of-range arguments")
	}
	// Many degrees of freedom: the normal.
	if got := TQuantile(0.975, 1e7); !near(got, 1.959963984540054, 1e-6) {
		t.Errorf("t with 1e7 df: %v", got)
	}
}

// TCDF and the quantiles against the second implementation: Simpson's
// rule on Student's density, and Python's statistics.NormalDist.
func TestDistributionsAgainstPython(t *testing.T) {
	points := [][2]float64{{0.5, 1}, {-2, 3}, {1.7, 4.5}, {2.2, 10}, {-0.3, 29}, {3, 200}, {0, 7}}
	quantiles := [][2]float64{{0.975, 3}, {0.9, 17}, {0.6, 2}, {0.99, 49}}
	normal := []float64{0.6, 0.975, 0.999, 0.01}
	var got struct {
		CDF            []float64 `json:"cdf"`
		Quantile       []float64 `json:"quantile"`
		NormalQuantile []float64 `json:"normal_quantile"`
	}
	python(t, "tcdf", map[string]any{"points": points, "quantiles": quantiles, "normal": normal}, &got)
	for i, p := range points {
		if g := TCDF(p[0], p[1]); !near(g, got.CDF[i], 1e-9) {
			t.Errorf("TCDF(%v, %v) = %.12f, python %.12f", p[0], p[1], g, got.CDF[i])
		}
	}
	for i, q := range quantiles {
		if g := TQuantile(q[0], q[1]); !near(g, got.Quantile[i], 1e-7) {
			t.Errorf("TQuantile(%v, %v) = %.10f, python %.10f", q[0], q[1], g, got.Quantile[i])
		}
	}
	for i, p := range normal {
		if g := NormalQuantile(p); !near(g, got.NormalQuantile[i], 1e-12) {
			t.Errorf("NormalQuantile(%v) = %.15f, python %.15f", p, g, got.NormalQuantile[i])
		}
	}
}
