package decide

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
)

// Scenario is a made-up benchmark whose truth is known: each task's
// probability of passing under the baseline and under the condition.
// Every trial is an independent draw given its task. Simulations on it
// check what the plan and the sequential test promise.
type Scenario struct {
	Baseline  []float64 `json:"baseline"`
	Condition []float64 `json:"condition"`
}

// Validate says what is wrong with a scenario.
func (s Scenario) Validate() error {
	if len(s.Baseline) < 2 || len(s.Baseline) != len(s.Condition) {
		return fmt.Errorf("a scenario needs the same tasks, at least 2, on both sides (%d and %d)", len(s.Baseline), len(s.Condition))
	}
	for i := range s.Baseline {
		for _, p := range []float64{s.Baseline[i], s.Condition[i]} {
			if !(p >= 0 && p <= 1) {
				return fmt.Errorf("task %d: probability %v is not in [0, 1]", i, p)
			}
		}
	}
	return nil
}

// Delta is the true difference: the mean over tasks of condition −
// baseline.
func (s Scenario) Delta() float64 {
	d := 0.0
	for i := range s.Baseline {
		d += s.Condition[i] - s.Baseline[i]
	}
	return d / float64(len(s.Baseline))
}

// Variance is the true variance of a pair's difference, split: within a
// task it is pc(1 − pc) + pb(1 − pb), averaged over tasks; between tasks
// it is the variance of the tasks' differences (the scenario's tasks are
// the whole population, so divided by N).
func (s Scenario) Variance() Variance {
	n := float64(len(s.Baseline))
	within, mean, sq := 0.0, 0.0, 0.0
	for i, b := range s.Baseline {
		c := s.Condition[i]
		within += c*(1-c) + b*(1-b)
		mean += c - b
		sq += (c - b) * (c - b)
	}
	mean /= n
	return Variance{Within: within / n, Between: math.Max(0, sq/n-mean*mean), Split: true}
}

// Outcome is one simulated (task, attempt): whether each side passed.
type Outcome struct {
	Task, Attempt       int
	Condition, Baseline bool
}

// Outcomes simulates a job that runs every task attempts times under both
// conditions, attempts numbered from 1.
func (s Scenario) Outcomes(attempts int, seed uint64) []Outcome {
	rng := newRand(seed, 0)
	var out []Outcome
	for a := 1; a <= attempts; a++ {
		for t := range s.Baseline {
			c, b := s.draw(rng, t)
			out = append(out, Outcome{Task: t, Attempt: a, Condition: c, Baseline: b})
		}
	}
	return out
}

func (s Scenario) draw(rng *rand.Rand, task int) (condition, baseline bool) {
	return rng.Float64() < s.Condition[task], rng.Float64() < s.Baseline[task]
}

// round is one round of every task.
func (s Scenario) round(rng *rand.Rand) Pairs {
	var p Pairs
	for t := range s.Baseline {
		p.Add(s.draw(rng, t))
	}
	return p
}

func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream^0x9e3779b97f4a7c15))
}

// simWorkers is how many goroutines share a simulation's jobs.
const simWorkers = 8

// parallel runs fn for jobs 0 to n−1, job j on worker j mod simWorkers,
// and waits for all. Each job seeds its own generator from its number, so
// the figures do not depend on the workers.
func parallel(n int, fn func(job int)) {
	var wg sync.WaitGroup
	for w := range simWorkers {
		wg.Go(func() {
			for j := w; j < n; j += simWorkers {
				fn(j)
			}
		})
	}
	wg.Wait()
}

// SequentialResult sums up simulated sequential jobs of one scenario.
type SequentialResult struct {
	Jobs     int             `json:"jobs"`
	Verdicts map[Verdict]int `json:"verdicts"`
	// False counts the decisions the truth contradicts.
	False int `json:"false_decisions"`
	// MeanRounds is the rounds a job used, on average, MaxRounds for one
	// that ended undecided; SDRounds their standard deviation (the Monte
	// Carlo error of the mean is SDRounds/√Jobs).
	MeanRounds float64 `json:"mean_rounds"`
	SDRounds   float64 `json:"sd_rounds"`
}

// Rate is the share of jobs with the verdict.
func (r SequentialResult) Rate(v Verdict) float64 { return float64(r.Verdicts[v]) / float64(r.Jobs) }

// FalseRate is the share of jobs that decided falsely.
func (r SequentialResult) FalseRate() float64 { return float64(r.False) / float64(r.Jobs) }

// SimulateSequential runs jobs sequential jobs on the scenario: rounds of
// every task under both conditions, each fed to a Test with the params,
// until it ends. seed fixes every draw.
func SimulateSequential(s Scenario, p Params, jobs int, seed uint64) (SequentialResult, error) {
	if err := errors.Join(s.Validate(), p.Validate()); err != nil {
		return SequentialResult{}, err
	}
	verdicts := make([]Verdict, jobs)
	rounds := make([]int, jobs)
	errs := make([]error, jobs)
	parallel(jobs, func(j int) {
		rng := newRand(seed, uint64(j))
		t, err := NewTest(p)
		if err != nil {
			errs[j] = err
			return
		}
		for r := 1; !t.Ended(); r++ {
			if _, err := t.Add(r, s.round(rng)); err != nil {
				errs[j] = err
				return
			}
		}
		verdicts[j], rounds[j] = t.Decision().Verdict, t.Rounds()
	})
	res := SequentialResult{Jobs: jobs, Verdicts: map[Verdict]int{}}
	delta := s.Delta()
	used := make([]float64, jobs)
	for j := range jobs {
		if errs[j] != nil {
			return SequentialResult{}, errs[j]
		}
		res.Verdicts[verdicts[j]]++
		used[j] = float64(rounds[j])
		if contradicts(verdicts[j], delta, p.Delta) {
			res.False++
		}
	}
	res.MeanRounds = meanOf(used)
	if jobs > 1 {
		res.SDRounds = math.Sqrt(sampleVariance(used))
	}
	return res, nil
}

// contradicts says whether a verdict is false for a true difference. A
// difference within 1e-9 of a boundary is on it: a scenario's mean of
// shifted probabilities is the shift only to rounding.
func contradicts(v Verdict, delta, margin float64) bool {
	const eps = 1e-9
	switch v {
	case Better:
		return delta <= eps
	case Worse:
		return delta >= -eps
	case Equivalent:
		return math.Abs(delta) >= margin-eps
	case NotBetter:
		return delta >= margin-eps
	}
	return false
}

// FixedResult sums up simulated fixed-design jobs of one scenario.
type FixedResult struct {
	Jobs int `json:"jobs"`
	// Rejections counts the jobs whose test found a difference; Detected
	// those that found it in the true direction.
	Rejections int `json:"rejections"`
	Detected   int `json:"detected"`
}

// Power is the share of jobs that found the true difference.
func (r FixedResult) Power() float64 { return float64(r.Detected) / float64(r.Jobs) }

// RejectionRate is the share of jobs that found a difference.
func (r FixedResult) RejectionRate() float64 { return float64(r.Rejections) / float64(r.Jobs) }

// SimulateFixed runs jobs jobs of a fixed design on the scenario and
// tests each as the goal's plan assumes. For ScopePopulation the tasks
// are drawn with replacement from the scenario's (tasks like these), and
// the test is troupe compare's task-clustered one: the CR1 standard
// error, which with equal attempts per task is the standard error of the
// task means, and a t test with G − 1 degrees of freedom. For ScopeTasks
// the tasks are drawn without replacement (all of them when the design
// has as many), and the test is a z test whose variance has the plan's
// form, estimated by the analysis of variance of EstimateVariance.
func SimulateFixed(s Scenario, d Design, g Goal, jobs int, seed uint64) (FixedResult, error) {
	if err := errors.Join(s.Validate(), g.Validate()); err != nil {
		return FixedResult{}, err
	}
	n := len(s.Baseline)
	if d.Tasks < 2 || d.Attempts < 1 || g.scope() == ScopeTasks && d.Tasks > n {
		return FixedResult{}, fmt.Errorf("design %d × %d does not fit a scenario of %d tasks", d.Tasks, d.Attempts, n)
	}
	g.Tasks = n
	truth := s.Delta()
	found := make([]int, jobs) // 0 none, 1 right direction, -1 wrong
	parallel(jobs, func(j int) {
		rng := newRand(seed, uint64(j))
		tasks := make([]Pairs, d.Tasks)
		pick := rng.Perm(n)
		for i := range tasks {
			t := pick[i%n]
			if g.scope() == ScopePopulation {
				t = rng.IntN(n)
			}
			for range d.Attempts {
				tasks[i].Add(s.draw(rng, t))
			}
		}
		found[j] = fixedTest(tasks, g)
		if found[j] != 0 && (truth >= 0) != (found[j] > 0) {
			found[j] = -1
		} else if found[j] != 0 {
			found[j] = 1
		}
	})
	res := FixedResult{Jobs: jobs}
	for _, f := range found {
		if f != 0 {
			res.Rejections++
		}
		if f == 1 {
			res.Detected++
		}
	}
	return res, nil
}

// fixedTest is a fixed design's two-sided test: +1 when it finds the
// condition better, −1 worse, 0 neither.
func fixedTest(tasks []Pairs, g Goal) int {
	var all Pairs
	means := make([]float64, len(tasks))
	for i, p := range tasks {
		all = all.Plus(p)
		means[i] = float64(p.Sum()) / float64(p.N())
	}
	mean := float64(all.Sum()) / float64(all.N())
	G := float64(len(tasks))
	var se, crit float64
	if g.scope() == ScopePopulation {
		se = math.Sqrt(sampleVariance(means) / G)
		crit = TQuantile(1-g.Alpha/2, G-1)
	} else {
		v, err := EstimateVariance(tasks)
		if err == nil {
			se = g.SE(v, len(tasks), tasks[0].N())
		}
		crit = NormalQuantile(1 - g.Alpha/2)
	}
	switch {
	case mean == 0 || math.Abs(mean) <= crit*se:
		return 0
	case mean > 0:
		return 1
	}
	return -1
}
