package decide

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// Scope is what a plan's difference is about, which decides whether the
// variance between tasks counts when every task is run.
type Scope string

const (
	// ScopeTasks is the difference on the benchmark's tasks themselves
	// (Goal.Tasks of them): they are the whole population, so a design
	// that runs them all has no between-task error, and one that runs a
	// sample of them has it with the finite-population correction
	// (Cochran 1977, Sampling Techniques, chapter 10: two-stage sampling).
	// It is what a sequential job (Test) decides, and the fixed design
	// it is measured against.
	ScopeTasks Scope = "tasks"
	// ScopePopulation is the difference on tasks like these, of which the
	// benchmark is a sample: the between-task variance always counts. It
	// is what troupe compare's task-clustered interval measures, and the
	// plan to make for a fixed job read with it.
	ScopePopulation Scope = "population"
)

// DefaultMaxAttempts bounds the attempts per task a plan weighs.
const DefaultMaxAttempts = 100

// Goal is what a design must achieve.
type Goal struct {
	// Delta is the difference in pass rate to detect, in (0, 1).
	Delta float64 `json:"delta"`
	// Alpha is the two-sided level of the test.
	Alpha float64 `json:"alpha"`
	// Power is the chance, 1 − β, of detecting a difference of Delta.
	Power float64 `json:"power"`
	// Tasks is the benchmark's number of tasks: a design uses at most
	// this many, and ScopeTasks is about them.
	Tasks int `json:"tasks"`
	// Scope is what the difference is about; "" is ScopeTasks.
	Scope Scope `json:"scope"`
	// MaxAttempts bounds the attempts per task weighed; 0 is
	// DefaultMaxAttempts.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

func (g Goal) scope() Scope {
	if g.Scope == "" {
		return ScopeTasks
	}
	return g.Scope
}

func (g Goal) maxAttempts() int {
	if g.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return g.MaxAttempts
}

// Validate says what is wrong with a goal, all at once.
func (g Goal) Validate() error {
	var errs []error
	if !(g.Delta > 0 && g.Delta < 1) {
		errs = append(errs, fmt.Errorf("the difference to detect, %v, is not in (0, 1)", g.Delta))
	}
	if !(g.Alpha > 0 && g.Alpha < 1) {
		errs = append(errs, fmt.Errorf("the level α, %v, is not in (0, 1)", g.Alpha))
	}
	if !(g.Power > 0 && g.Power < 1) {
		errs = append(errs, fmt.Errorf("the power, %v, is not in (0, 1)", g.Power))
	}
	if g.Tasks < 2 {
		errs = append(errs, fmt.Errorf("%d tasks: a paired design needs at least 2", g.Tasks))
	}
	if s := g.scope(); s != ScopeTasks && s != ScopePopulation {
		errs = append(errs, fmt.Errorf("scope %q is neither %q nor %q", s, ScopeTasks, ScopePopulation))
	}
	return errors.Join(errs...)
}

// Design is a fixed design: Tasks tasks, each run Attempts times under
// the condition and under the baseline, paired on (task, attempt).
type Design struct {
	Tasks    int `json:"tasks"`
	Attempts int `json:"attempts"`
	// SE is the standard error of the mean paired difference under the
	// design, from the variance the plan was given.
	SE float64 `json:"se"`
	// Power is the chance that the test detects a difference of Delta.
	Power float64 `json:"power"`
}

// Pairs is how many (task, attempt) the design runs under each
// condition: the trials of one side.
func (d Design) Pairs() int { return d.Tasks * d.Attempts }

// SE is the standard error of the mean paired difference with tasks ×
// attempts: Between/G + Within/(G·K) for ScopePopulation, and the
// between-task term times (1 − G/N) for ScopeTasks. When the split is not
// known it is the larger of the two extreme splits, so that a plan never
// counts on attempts averaging away what may be between tasks.
func (g Goal) SE(v Variance, tasks, attempts int) float64 {
	if !v.Split {
		t := v.Total()
		return math.Sqrt(math.Max(g.variance(t, 0, tasks, attempts), g.variance(0, t, tasks, attempts)))
	}
	return math.Sqrt(g.variance(v.Between, v.Within, tasks, attempts))
}

func (g Goal) variance(between, within float64, tasks, attempts int) float64 {
	G, K := float64(tasks), float64(attempts)
	if g.scope() == ScopeTasks {
		between *= max(0, 1-G/float64(g.Tasks))
	}
	return between/G + within/(G*K)
}

// PowerOf is the chance that the design's two-sided test at level Alpha
// detects a difference of Delta. For ScopePopulation the test is troupe
// compare's task-clustered one, a t test with G − 1 degrees of freedom,
// and the power is its usual approximation, the shifted central t; for
// ScopeTasks it is the z test.
func (g Goal) PowerOf(v Variance, tasks, attempts int) float64 {
	if tasks < 2 || attempts < 1 {
		return 0
	}
	se := g.SE(v, tasks, attempts)
	if se == 0 {
		return 1
	}
	shift := g.Delta / se
	if g.scope() == ScopePopulation {
		df := float64(tasks - 1)
		crit := TQuantile(1-g.Alpha/2, df)
		return TCDF(shift-crit, df) + TCDF(-shift-crit, df)
	}
	crit := NormalQuantile(1 - g.Alpha/2)
	return NormalCDF(shift-crit) + NormalCDF(-shift-crit)
}

func (g Goal) design(v Variance, tasks, attempts int) Design {
	return Design{Tasks: tasks, Attempts: attempts, SE: g.SE(v, tasks, attempts), Power: g.PowerOf(v, tasks, attempts)}
}

// UnreachableError is a goal no design within the goal's tasks and
// attempts reaches. Best is the most powerful design there is (every
// task, the most attempts).
type UnreachableError struct {
	Goal Goal
	Best Design
}

func (e *UnreachableError) Error() string {
	why := "run more tasks, or aim for a larger difference"
	if e.Goal.scope() == ScopePopulation {
		why = "the variance between tasks does not shrink with attempts: " + why
	}
	return fmt.Sprintf("no design of at most %d tasks × %d attempts detects %.3g with power %.3g (the best, %d × %d, has %.3g): %s",
		e.Goal.Tasks, e.Goal.maxAttempts(), e.Goal.Delta, e.Goal.Power, e.Best.Tasks, e.Best.Attempts, e.Best.Power, why)
}

// FewestTasks is the design with the given attempts per task and the
// fewest tasks (at most Goal.Tasks) that reaches the goal's power; ok is
// false when even every task does not.
func (g Goal) FewestTasks(v Variance, attempts int) (Design, bool) {
	if g.PowerOf(v, g.Tasks, attempts) < g.Power {
		return g.design(v, g.Tasks, attempts), false
	}
	// Power grows with the tasks (the standard error falls and the
	// degrees of freedom rise): bisect.
	lo, hi := 1, g.Tasks // power(lo) < goal <= power(hi)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if g.PowerOf(v, mid, attempts) >= g.Power {
			hi = mid
		} else {
			lo = mid
		}
	}
	return g.design(v, hi, attempts), true
}

// Plan is the design with the fewest pairs that reaches the goal, or an
// *UnreachableError. Of two designs with as many pairs, the one with more
// tasks is taken: it says more about tasks beyond the pilot's.
func Plan(v Variance, g Goal) (Design, error) {
	if err := g.Validate(); err != nil {
		return Design{}, err
	}
	if v.Total() <= 0 {
		return Design{}, ErrNoVariance
	}
	var best Design
	found := false
	for k := 1; k <= g.maxAttempts(); k++ {
		if found && 2*k > best.Pairs() {
			break // at least 2 tasks: no more attempts can do with fewer pairs
		}
		d, ok := g.FewestTasks(v, k)
		if ok && (!found || d.Pairs() < best.Pairs()) {
			best, found = d, true
		}
	}
	if !found {
		return Design{}, &UnreachableError{Goal: g, Best: g.design(v, g.Tasks, g.maxAttempts())}
	}
	return best, nil
}

// PlanRounds is the design that runs every one of the goal's tasks, with
// the fewest attempts that reach the goal: the fixed design of a job run
// in rounds, which a sequential Test's saving is measured against (use
// ScopeTasks, the difference Test decides).
func PlanRounds(v Variance, g Goal) (Design, error) {
	if err := g.Validate(); err != nil {
		return Design{}, err
	}
	if v.Total() <= 0 {
		return Design{}, ErrNoVariance
	}
	for k := 1; k <= g.maxAttempts(); k++ {
		if d := g.design(v, g.Tasks, k); d.Power >= g.Power {
			return d, nil
		}
	}
	return Design{}, &UnreachableError{Goal: g, Best: g.design(v, g.Tasks, g.maxAttempts())}
}

// PerTrial is what one scored trial of a condition costs, as a pilot
// measured it.
type PerTrial struct {
	CostUSD modelcall.USD `json:"cost_usd"`
	Wall    time.Duration `json:"wall_ns"`
}

// Spend is what running some trials costs: money, and time trial by trial
// (divide by the job's concurrency for the time it takes).
type Spend struct {
	Trials  int           `json:"trials"`
	CostUSD modelcall.USD `json:"cost_usd"`
	Wall    time.Duration `json:"trial_time_ns"`
}

// Spend is what n trials cost at these figures.
func (p PerTrial) Spend(n int) Spend {
	return Spend{Trials: n, CostUSD: modelcall.USD(n) * p.CostUSD, Wall: time.Duration(n) * p.Wall}
}

// Plus is both spends together.
func (s Spend) Plus(o Spend) Spend {
	return Spend{Trials: s.Trials + o.Trials, CostUSD: s.CostUSD + o.CostUSD, Wall: s.Wall + o.Wall}
}
