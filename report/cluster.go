package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/trialdir"
)

// Cluster is one task's part of a mean over trials: the sum of its values
// (passes, or paired differences) and how many values there are. The
// attempts of one task are not independent draws (a task hard for a
// roster is hard every time), so the task, not the trial, is the unit a
// task-clustered interval resamples or sums over.
type Cluster struct {
	Sum float64
	N   int
}

// clusterMean is Σ sums / Σ counts: the mean over trials, as the pass
// rate and the paired difference are.
func clusterMean(clusters []Cluster) float64 {
	s, n := 0.0, 0
	for _, c := range clusters {
		s += c.Sum
		n += c.N
	}
	return s / float64(n)
}

// ClusterBootstrap is the percentile 95% interval of the mean over trials
// from resamples of the tasks (with replacement, each with all its
// trials), with a fixed seed: the bootstrap for clustered data (the
// "pairs cluster bootstrap" of Cameron, Gelbach and Miller 2008; Field
// and Welsh 2007, "Bootstrapping clustered data", on when it holds). Like
// every percentile bootstrap it is too narrow with few tasks, which is
// why CR1Interval, not this, is the headline. Fewer than two tasks give
// no interval (NaN).
func ClusterBootstrap(clusters []Cluster, resamples int, seed uint64) Interval {
	g := len(clusters)
	if g < 2 || resamples <= 0 {
		return Interval{math.NaN(), math.NaN()}
	}
	// Its own stream: the paired bootstrap's draws are not reused.
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	means := make([]float64, resamples)
	for r := range means {
		s, n := 0.0, 0
		for range g {
			c := clusters[rng.IntN(g)]
			s += c.Sum
			n += c.N
		}
		means[r] = s / float64(n)
	}
	slices.Sort(means)
	return Interval{quantile(means, 0.025), quantile(means, 0.975)}
}

// ClusterRobustSE is the cluster-robust (sandwich) standard error of the
// mean over trials, clustered by task, with the CR1 small-sample factor
// G/(G−1)·(N−1)/(N−K), K = 1 (Cameron and Miller 2015, "A Practitioner's
// Guide to Cluster-Robust Inference", §VI; Stata's default): for the mean
// it is √(G/(G−1) · Σ_g (s_g − m·n_g)² / N²), with s_g and n_g a task's
// sum and count. Fewer than two tasks give NaN.
func ClusterRobustSE(clusters []Cluster) float64 {
	g := len(clusters)
	if g < 2 {
		return math.NaN()
	}
	m := clusterMean(clusters)
	ss, n := 0.0, 0
	for _, c := range clusters {
		e := c.Sum - m*float64(c.N)
		ss += e * e
		n += c.N
	}
	return math.Sqrt(float64(g) / float64(g-1) * ss / (float64(n) * float64(n)))
}

// CR1Interval is the mean ± t·SE, with t the 97.5% quantile of Student's
// t with G − 1 degrees of freedom (the reference distribution Cameron and
// Miller recommend with few clusters: the normal's 1.96 is too narrow
// below about 50 tasks), kept inside [lo, hi], the values a mean can
// take.
func CR1Interval(clusters []Cluster, lo, hi float64) Interval {
	se := ClusterRobustSE(clusters)
	if math.IsNaN(se) {
		return Interval{math.NaN(), math.NaN()}
	}
	m := clusterMean(clusters)
	half := decide.TQuantile(0.975, float64(len(clusters)-1)) * se
	return Interval{math.Max(lo, m-half), math.Min(hi, m+half)}
}

// Clustered are the task-clustered intervals of a pass rate or of a
// paired difference, beside the Wilson or paired-bootstrap one.
type Clustered struct {
	// Tasks is G, the tasks with a scored trial (or pair); MaxAttempts
	// the most any of them has.
	Tasks       int `json:"n_tasks"`
	MaxAttempts int `json:"max_attempts_per_task"`
	// SE is the CR1 standard error, DF its degrees of freedom (G − 1);
	// CR1 the t interval from them.
	SE  float64  `json:"cr1_se"`
	DF  int      `json:"cr1_df"`
	CR1 Interval `json:"cr1_ci95"`
	// TaskBootstrap resamples tasks (BootstrapResamples, BootstrapSeed).
	TaskBootstrap Interval `json:"task_bootstrap_ci95"`
}

// MarshalJSON writes a standard error that does not exist (one task) as
// null.
func (c Clustered) MarshalJSON() ([]byte, error) {
	type plain Clustered
	return json.Marshal(struct {
		plain
		SE any `json:"cr1_se"`
	}{plain(c), finite(c.SE)})
}

// clustered computes the task-clustered intervals of a mean whose values
// lie in [lo, hi].
func clustered(clusters []Cluster, lo, hi float64) Clustered {
	c := Clustered{Tasks: len(clusters), SE: ClusterRobustSE(clusters), CR1: CR1Interval(clusters, lo, hi),
		TaskBootstrap: ClusterBootstrap(clusters, BootstrapResamples, BootstrapSeed)}
	for _, cl := range clusters {
		c.MaxAttempts = max(c.MaxAttempts, cl.N)
	}
	if len(clusters) >= 2 {
		c.DF = len(clusters) - 1
	}
	return c
}

// The intervals a headline may be.
const (
	IntervalWilson          = "wilson"
	IntervalPairedBootstrap = "paired_bootstrap"
	IntervalCR1             = "cr1"
	IntervalTaskBootstrap   = "task_bootstrap"
	// IntervalAnytime is a sequential job's confidence sequence, which
	// SetSequential makes the headline.
	IntervalAnytime = "anytime"
)

// IntervalPolicy says, in every comparison, which interval is the
// headline and why.
const IntervalPolicy = "task-clustered (CR1 standard error, t with G−1 degrees of freedom for G tasks) " +
	"when some task has more than one scored attempt or pair, since attempts of one task are not independent and the Wilson or " +
	"paired-bootstrap interval would be too narrow; otherwise, or with one task, or when every task has the same mean (a clustered interval of no width), " +
	"Wilson's for a pass rate and the paired bootstrap's for a difference. The task bootstrap is shown beside them"

// Headline is the interval a row leads with, and why.
type Headline struct {
	// Interval names it: wilson, paired_bootstrap or cr1.
	Interval string   `json:"interval"`
	CI       Interval `json:"ci95"`
	Why      string   `json:"why"`
}

// headline chooses between the task-clustered interval and the plain one
// (Wilson's, or the paired bootstrap's) as IntervalPolicy says. unit is
// what a task has several of: "scored attempts" or "pairs".
func headline(c Clustered, plain Interval, plainName, unit string) Headline {
	h := Headline{Interval: plainName, CI: plain}
	switch {
	case c.Tasks == 0:
		h.Why = "nothing to measure"
	case c.MaxAttempts <= 1:
		h.Why = fmt.Sprintf("one of the %s per task: they are independent", unit)
	case c.Tasks < 2:
		h.Why = "one task: a task-clustered interval needs two"
	case c.SE == 0:
		h.Why = "every task has the same mean, so the task-clustered interval has no width"
	default:
		h.Interval, h.CI = IntervalCR1, c.CR1
		h.Why = fmt.Sprintf("a task has %d %s, which are not independent: task-clustered, t with %d df", c.MaxAttempts, unit, c.DF)
	}
	return h
}

// intervalName is how tables name an interval.
func intervalName(interval string) string {
	switch interval {
	case IntervalWilson:
		return "Wilson"
	case IntervalPairedBootstrap:
		return "paired bootstrap"
	case IntervalCR1:
		return "CR1"
	case IntervalTaskBootstrap:
		return "task bootstrap"
	case IntervalAnytime:
		return "anytime-valid"
	}
	return interval
}

// Sequential is what a sequential job decided about a condition against
// the baseline (decide.Test): its method, settings and decision.
type Sequential struct {
	Method   string          `json:"method"`
	Params   decide.Params   `json:"params"`
	Decision decide.Decision `json:"decision"`
}

// SetSequential records a sequential job's test of a condition against
// the comparison's baseline, and makes its anytime-valid interval the
// difference's headline: the job looked after every round, and the
// fixed-sample intervals hold only for a sample size fixed in advance.
// The fixed-sample intervals stay beside it. A condition that is not
// compared with the baseline is an error.
func (c *Comparison) SetSequential(condition string, t *decide.Test) error {
	i := slices.IndexFunc(c.Paired, func(p Paired) bool { return p.Condition == condition })
	if i < 0 {
		return fmt.Errorf("sequential test of %q: no such condition against %s", condition, c.Baseline)
	}
	d := t.Decision()
	p := &c.Paired[i]
	p.Sequential = &Sequential{Method: decide.Method, Params: t.Params(), Decision: d}
	p.DiffHeadline = Headline{Interval: IntervalAnytime, CI: Interval{d.Interval.Low, d.Interval.High},
		Why: fmt.Sprintf("a sequential job, which looked after each of its %d rounds: the anytime-valid interval (%s), %s",
			d.Rounds, decide.Citation, sequentialVerdict(d))}
	return nil
}

// sequentialVerdict says what the test decided, and when.
func sequentialVerdict(d decide.Decision) string {
	switch {
	case d.Verdict != decide.Undecided:
		return fmt.Sprintf("decided %s at round %d", strings.ReplaceAll(string(d.Verdict), "_", " "), d.Round)
	case d.Ended:
		return "undecided at its maximum"
	}
	return "undecided so far"
}

// LoadSequential reads the tests of the sequential jobs under the given
// folders (decide.JobFile in a job folder), as Load finds jobs.
func LoadSequential(dirs ...string) ([]*decide.JobRecord, error) {
	var recs []*decide.JobRecord
	var errs []error
	for _, dir := range dirs {
		err := walkFolders(dir, func(p string) bool {
			if _, err := os.Stat(filepath.Join(p, trialdir.Log)); err == nil {
				return true // a trial's folder: no job's file is in it
			}
			if rec, err := decide.ReadJob(p); err != nil {
				errs = append(errs, err)
			} else if rec != nil {
				recs = append(recs, rec)
			}
			return false
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return recs, errors.Join(errs...)
}

// ApplySequential makes each sequential job's anytime-valid intervals the
// headline of its conditions against its baseline: after optional
// stopping the fixed-sample intervals would be wrong. A job tested against
// another baseline than the comparison's gets a warning saying which.
func (c *Comparison) ApplySequential(recs []*decide.JobRecord) {
	applied := map[string]bool{}
	for _, rec := range recs {
		if rec.Baseline != c.Baseline {
			c.Warnings = append(c.Warnings, fmt.Sprintf("a sequential job decided against %s, not %s: compare with --baseline %s for its anytime-valid intervals (the fixed-sample ones shown here do not allow for its stopping)", rec.Baseline, c.Baseline, rec.Baseline))
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(rec.Conditions)) {
			if applied[name] {
				c.Warnings = append(c.Warnings, fmt.Sprintf("condition %s was tested sequentially by more than one job: the first job's test is shown", name))
				continue
			}
			if err := c.SetSequential(name, rec.Conditions[name].Test); err == nil {
				applied[name] = true
			}
		}
	}
}
