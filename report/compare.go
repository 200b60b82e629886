package report

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial/outcome"
)

// Policy is how outcomes count, stated in every comparison: outcome's
// words, which the job's own counts follow too, and how cost per solved is
// figured.
const Policy = outcome.Policy + "; cost per solved is the cost of the scored trials over their passes"

// MinPairs is how many paired (task, attempt) results a comparison needs
// before its difference is worth reading.
const MinPairs = 10

// Condition is one roster's results. A figure of the scored trials is NaN
// when none was scored (null in JSON, "-" in tables): a pass rate, mean or
// interval of nothing is no figure, and 0 would read as a measured one.
type Condition struct {
	Name         string `json:"condition"`
	ManifestHash string `json:"manifest_sha256"`
	Trials       int    `json:"n_trials"`
	// Scored are the trials that count: passed, failed, verifier_error.
	Scored int `json:"n_scored"`
	// Tally counts the trials by outcome, as the job's result.json does.
	outcome.Tally
	PassRate float64 `json:"pass_rate"`
	// PassRateCI is the Wilson interval; with nothing scored its bounds
	// are NaN, not the [0, 1] that says nothing.
	PassRateCI Interval `json:"pass_rate_ci95"`
	// PassRateClustered are the task-clustered intervals of the pass
	// rate; PassRateHeadline is the interval the condition leads with
	// (IntervalPolicy), in every format.
	PassRateClustered Clustered `json:"pass_rate_clustered"`
	PassRateHeadline  Headline  `json:"pass_rate_headline"`
	MeanReward        float64   `json:"mean_reward"`
	// PassAtK maps k to the mean over tasks of the unbiased pass@k, for
	// the k every task has enough scored attempts for; nil with nothing
	// scored.
	PassAtK map[int]float64 `json:"pass_at_k"`
	// Costs are over scored trials; CostPerSolved is their total cost
	// divided by the passes (+Inf with none). CostPerTrialCI is a
	// percentile bootstrap interval of the mean (BootstrapSeed,
	// BootstrapResamples).
	CostPerTrialMean   modelcall.USD `json:"cost_per_trial_mean_usd"`
	CostPerTrialCI     Interval      `json:"cost_per_trial_mean_ci95"`
	CostPerTrialMedian modelcall.USD `json:"cost_per_trial_median_usd"`
	CostPerSolved      modelcall.USD `json:"cost_per_solved_usd"`
	// TotalCostUSD is what every trial spent, unscored ones included, and
	// the runs a job redid (RedoneCostUSD): the real spend, shown even when
	// nothing was scored. troupe run's totals are the same figure.
	TotalCostUSD modelcall.USD `json:"total_cost_usd"`
	// RedoneCostUSD is what the runs a job redid after an infrastructure
	// failure or an interruption (kept in .superseded/) cost.
	RedoneCostUSD modelcall.USD               `json:"redone_cost_usd"`
	ByRole        map[string]modelcall.Totals `json:"by_role"`
	// Wall times are over the scored trials that have both times; walls
	// counts those (none: null in JSON).
	WallMean   time.Duration `json:"wall_mean_ns"`
	WallMedian time.Duration `json:"wall_median_ns"`
	walls      int
}

// Paired compares one condition with the baseline on the (task, attempt)
// pairs both have scored.
type Paired struct {
	Condition string `json:"condition"`
	Baseline  string `json:"baseline"`
	Pairs     int    `json:"n_pairs"`
	// Diff is the condition's pass rate minus the baseline's, on the pairs.
	Diff float64 `json:"pass_rate_diff"`
	// DiffCI is the paired bootstrap's interval; DiffClustered the
	// task-clustered ones; DiffHeadline the one the row leads with.
	DiffCI        Interval  `json:"pass_rate_diff_ci95"`
	DiffClustered Clustered `json:"pass_rate_diff_clustered"`
	DiffHeadline  Headline  `json:"pass_rate_diff_headline"`
	// Sequential is set (SetSequential) for a sequential job: its test
	// and decision, whose interval is then the headline.
	Sequential *Sequential `json:"sequential,omitempty"`
	// ByTask are the pairs of each task, in task order, for a plan
	// (decide.EstimateVariance); not written.
	ByTask []decide.Pairs `json:"-"`
	// The four kinds of pairs; McNemar's test uses the discordant ones.
	BothPassed   int `json:"n_both_passed"`
	OnlyBaseline int `json:"n_only_baseline_passed"`
	OnlyThis     int `json:"n_only_condition_passed"`
	NeitherPass  int `json:"n_neither_passed"`
	// McNemarP is NaN (null) with no pair: there is nothing to test.
	McNemarP float64 `json:"mcnemar_exact_p"`
	Warning  string  `json:"warning,omitempty"`
}

// Cell is a task's results under one condition: the grid of the report.
type Cell struct {
	Passed int `json:"n_passed"`
	Scored int `json:"n_scored"`
	Trials int `json:"n_trials"`
}

// Comparison is the whole report.
type Comparison struct {
	Policy string `json:"policy"`
	// IntervalPolicy says which interval each row leads with, and why.
	IntervalPolicy string       `json:"interval_policy"`
	Conditions     []*Condition `json:"conditions"`
	Baseline       string       `json:"baseline,omitempty"`
	Paired         []Paired     `json:"paired,omitempty"`
	Bootstrap      struct {
		Seed      uint64 `json:"seed"`
		Resamples int    `json:"resamples"`
	} `json:"bootstrap"`
	Tasks []string                   `json:"tasks"`
	Grid  map[string]map[string]Cell `json:"grid"`
	// Warnings are about the data: mixed manifests under one name, etc.
	Warnings []string `json:"warnings,omitempty"`
	// Skipped are the results that could not be read (Load's
	// *UnreadableError): left out of every figure, and so named in every
	// format. The caller sets them: Compare sees only trials.
	Skipped []Unreadable `json:"skipped"`
}

// Compare groups trials by condition (by manifest hash; the name is what is
// shown) and compares each with the baseline, the first condition by name
// when baseline is "".
func Compare(trials []*Trial, baseline string) (*Comparison, error) {
	c := &Comparison{Policy: Policy, IntervalPolicy: IntervalPolicy, Grid: map[string]map[string]Cell{}}
	c.Bootstrap.Seed, c.Bootstrap.Resamples = BootstrapSeed, BootstrapResamples
	g := groupTrials(trials)
	c.warnUntrusted(trials)
	c.nameApart(g)
	keys := make([]string, 0, len(g.byKey))
	for k := range g.byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return strings.Compare(g.names[a], g.names[b]) })
	c.addConditions(keys, g)
	if len(c.Conditions) == 0 {
		return c, nil
	}
	baseKey := keys[0]
	if baseline != "" {
		var err error
		if baseKey, err = findCondition(keys, g.names, baseline); err != nil {
			return nil, err
		}
	}
	c.Baseline = g.names[baseKey]
	others := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == baseKey })
	c.Paired = make([]Paired, len(others))
	each(len(others), func(i int) {
		k := others[i]
		c.Paired[i] = pair(g.names[k], g.byKey[k], c.Baseline, g.byKey[baseKey])
	})
	return c, nil
}

// grouping is the trials by condition: by manifest hash (or, without one,
// by name), the runs redone apart.
type grouping struct {
	byKey        map[string][]*Trial
	redone       map[string][]*Trial // key -> runs redone, for their cost
	names        map[string]string   // key -> shown name
	hashesByName map[string][]string
}

func groupTrials(trials []*Trial) grouping {
	g := grouping{byKey: map[string][]*Trial{}, redone: map[string][]*Trial{}, names: map[string]string{}, hashesByName: map[string][]string{}}
	for _, t := range trials {
		key := t.ManifestHash
		if key == "" {
			key = "name:" + t.Condition
		}
		if t.Redone {
			g.redone[key] = append(g.redone[key], t)
			continue
		}
		if _, ok := g.names[key]; !ok {
			g.names[key] = t.Condition
			g.hashesByName[t.Condition] = append(g.hashesByName[t.Condition], key)
		}
		g.byKey[key] = append(g.byKey[key], t)
	}
	return g
}

// warnUntrusted warns, per condition, of trials whose verdict is marked
// untrusted, and of those during whose verifier agent code ran.
func (c *Comparison) warnUntrusted(trials []*Trial) {
	untrusted, ran := map[string]int{}, map[string]int{}
	for _, t := range trials {
		if t.VerdictUntrusted && !t.Redone {
			untrusted[t.Condition]++
		}
		if t.AgentCodeDuringVerifier && !t.Redone {
			ran[t.Condition]++
		}
	}
	for _, name := range slices.Sorted(maps.Keys(untrusted)) {
		c.Warnings = append(c.Warnings, fmt.Sprintf("condition %q has %d trials whose verdict is marked untrusted: their system files (a shell, an interpreter, /tests) changed before the verifier ran; result.json's system_changes names them (docs/run.md, step 9)", name, untrusted[name]))
	}
	for _, name := range slices.Sorted(maps.Keys(ran)) {
		c.Warnings = append(c.Warnings, fmt.Sprintf("condition %q has %d trials during whose verifier agent code ran: processes the agents left running were kept (--services keep, or the task's declaration); result.json's sweep.kept names them (docs/run.md, \"Services the agents leave running\")", name, ran[name]))
	}
}

// nameApart tells two rosters under one name apart by their hash, and
// warns of it.
func (c *Comparison) nameApart(g grouping) {
	for _, name := range slices.Sorted(maps.Keys(g.hashesByName)) {
		keys := g.hashesByName[name]
		if len(keys) < 2 {
			continue
		}
		c.Warnings = append(c.Warnings, fmt.Sprintf("condition %q names %d different manifests; they are shown apart, with their hash", name, len(keys)))
		for _, k := range keys {
			if strings.HasPrefix(k, "name:") {
				g.names[k] = name + "@unhashed"
			} else {
				// The hash's first characters are a label, not a
				// quote: no ellipsis.
				g.names[k] = name + "@" + strings.TrimSuffix(clip.Head(k, 8), clip.Ellipsis)
			}
		}
	}
}

// addConditions summarizes each condition (keys in the order shown), adds
// the cost of its redone runs, and fills the task grid.
func (c *Comparison) addConditions(keys []string, g grouping) {
	tasks := map[string]bool{}
	conds := make([]*Condition, len(keys))
	each(len(keys), func(i int) { conds[i] = summarize(g.names[keys[i]], keys[i], g.byKey[keys[i]]) })
	for i, k := range keys {
		cond := conds[i]
		for _, t := range g.redone[k] {
			cond.RedoneCostUSD += t.AgentResult.CostUSD
			cond.TotalCostUSD += t.AgentResult.CostUSD
			addUsage(cond.ByRole, t)
		}
		c.Conditions = append(c.Conditions, cond)
		for _, t := range g.byKey[k] {
			tasks[t.TaskName] = true
			row := c.Grid[t.TaskName]
			if row == nil {
				row = map[string]Cell{}
				c.Grid[t.TaskName] = row
			}
			cell := row[cond.Name]
			cell.Trials++
			if t.Outcome.Scored() {
				cell.Scored++
				if t.Outcome == outcome.Passed {
					cell.Passed++
				}
			}
			row[cond.Name] = cell
		}
	}
	for t := range tasks {
		c.Tasks = append(c.Tasks, t)
	}
	slices.Sort(c.Tasks)
}

// each calls fn for 0 to n-1, each on its own goroutine, and waits for
// all. The conditions' bootstraps are independent, each with its own
// seeded generator, so the figures are the same as in turn, sooner: they
// are most of the time of a comparison of many trials.
func each(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

// findCondition resolves --baseline: a shown name exactly, or else the start
// of one manifest hash (never a part of a name: "so" is not "solo").
func findCondition(keys []string, names map[string]string, want string) (string, error) {
	if i := slices.IndexFunc(keys, func(k string) bool { return names[k] == want }); i >= 0 {
		return keys[i], nil
	}
	var byHash []string
	for _, k := range keys {
		if !strings.HasPrefix(k, "name:") && strings.HasPrefix(k, strings.ToLower(want)) {
			byHash = append(byHash, k)
		}
	}
	known := make([]string, len(keys))
	for i, k := range keys {
		known[i] = names[k]
	}
	switch len(byHash) {
	case 1:
		return byHash[0], nil
	case 0:
		return "", fmt.Errorf("no condition %q among %s (give a condition's name or the start of its manifest hash)", want, strings.Join(known, ", "))
	default:
		var which []string
		for _, k := range byHash {
			which = append(which, names[k])
		}
		return "", fmt.Errorf("%q starts the manifest hash of %d conditions (%s): give more of the hash, or a name", want, len(byHash), strings.Join(which, ", "))
	}
}

// summarize computes one condition's figures.
func summarize(name, key string, trials []*Trial) *Condition {
	c := &Condition{Name: name, ManifestHash: strings.TrimPrefix(key, "name:"), ByRole: map[string]modelcall.Totals{}}
	if strings.HasPrefix(key, "name:") {
		c.ManifestHash = ""
	}
	var costs, rewards []float64
	var walls []float64
	perTask := map[string][2]int{} // task -> scored, passed
	for _, t := range trials {
		c.Tally.Add(t.Outcome)
		c.TotalCostUSD += t.AgentResult.CostUSD
		addUsage(c.ByRole, t)
		if !t.Outcome.Scored() {
			continue
		}
		costs = append(costs, float64(t.AgentResult.CostUSD))
		reward := 0.0
		if t.Reward != nil {
			reward = *t.Reward
		}
		rewards = append(rewards, reward)
		// A result without both times (hand-made, or written by a
		// crashed run) has no wall time; it must not drag the mean.
		if !t.StartedAt.IsZero() && !t.FinishedAt.IsZero() && t.Wall() >= 0 {
			walls = append(walls, float64(t.Wall()))
		}
		pt := perTask[t.TaskName]
		pt[0]++
		if t.Outcome == outcome.Passed {
			pt[1]++
		}
		perTask[t.TaskName] = pt
	}
	// readTrial refuses an outcome outside the vocabulary, so the tally
	// counts every trial.
	c.Trials, c.Scored = c.Tally.Trials(), c.Tally.Scored()
	// mean, median and the intervals are NaN with nothing scored.
	c.PassRate = c.Tally.PassRate()
	c.PassRateCI = Wilson(c.Passed, c.Scored)
	c.PassRateClustered = clustered(taskClusters(perTask), 0, 1)
	c.PassRateHeadline = headline(c.PassRateClustered, c.PassRateCI, IntervalWilson, "scored attempts")
	c.MeanReward = mean(rewards)
	c.CostPerTrialMean = modelcall.USD(mean(costs))
	c.CostPerTrialMedian = modelcall.USD(median(costs))
	c.CostPerTrialCI = BootstrapMean(costs, BootstrapResamples, BootstrapSeed)
	c.walls = len(walls)
	if len(walls) > 0 {
		c.WallMean = time.Duration(mean(walls))
		c.WallMedian = time.Duration(median(walls))
	}
	c.CostPerSolved = modelcall.USD(math.Inf(1))
	if c.Passed > 0 {
		c.CostPerSolved = modelcall.USD(sum(costs) / float64(c.Passed))
	}
	c.PassAtK = passAtKOverTasks(perTask)
	return c
}

// taskClusters are the passes of each task, in task order.
func taskClusters(perTask map[string][2]int) []Cluster {
	var out []Cluster
	for _, task := range slices.Sorted(maps.Keys(perTask)) {
		pt := perTask[task]
		out = append(out, Cluster{Sum: float64(pt[1]), N: pt[0]})
	}
	return out
}

// addUsage adds a trial's usage to its roles' sums: every trial counts,
// unscored ones too, since every trial was paid for.
func addUsage(byRole map[string]modelcall.Totals, t *Trial) {
	for _, a := range t.Agents {
		role := cmp.Or(a.Role, a.Kind)
		u := byRole[role]
		u.Add(a.Usage)
		byRole[role] = u
	}
}

// passAtKOverTasks is pass@k for the k every task can give, averaged over
// the tasks with a scored attempt; nil when there is none.
func passAtKOverTasks(perTask map[string][2]int) map[int]float64 {
	if len(perTask) == 0 {
		return nil
	}
	minN := math.MaxInt
	for _, pt := range perTask {
		minN = min(minN, pt[0])
	}
	out := map[int]float64{}
	for _, k := range []int{1, 2, 3, 5, 10, 20, 50, 100} {
		if k > minN {
			break
		}
		// In task order: a float sum must not change with map order.
		total := 0.0
		for _, task := range slices.Sorted(maps.Keys(perTask)) {
			pt := perTask[task]
			v, _ := PassAtK(pt[0], pt[1], k)
			total += v
		}
		out[k] = total / float64(len(perTask))
	}
	return out
}

// pair compares a condition with the baseline on shared (task, attempt).
// A (task, attempt) scored more than once on a side (two jobs of one
// manifest compared together) is paired once, with its latest result on
// each side, so neither side's duplicates weigh twice; a task whose files
// changed between the two runs is not paired at all.
func pair(name string, trials []*Trial, baseName string, base []*Trial) Paired {
	p := Paired{Condition: name, Baseline: baseName}
	thisBy, thisDup := latestScored(trials)
	baseBy, baseDup := latestScored(base)
	var diffs []float64
	byTask := map[string]*decide.Pairs{}
	var tasks []string // in order: the keys are sorted by task
	changed := 0
	for _, k := range slices.SortedFunc(maps.Keys(thisBy), func(a, b pairKey) int {
		return cmp.Or(strings.Compare(a.task, b.task), cmp.Compare(a.attempt, b.attempt))
	}) {
		t := thisBy[k]
		b, ok := baseBy[k]
		if !ok {
			continue
		}
		if t.TaskChecksum != "" && b.TaskChecksum != "" && t.TaskChecksum != b.TaskChecksum {
			changed++
			continue
		}
		p.Pairs++
		this, that := t.Outcome == outcome.Passed, b.Outcome == outcome.Passed
		switch {
		case this && that:
			p.BothPassed++
		case that:
			p.OnlyBaseline++
		case this:
			p.OnlyThis++
		default:
			p.NeitherPass++
		}
		d := 0.0
		if this {
			d++
		}
		if that {
			d--
		}
		diffs = append(diffs, d)
		if byTask[k.task] == nil {
			byTask[k.task] = &decide.Pairs{}
			tasks = append(tasks, k.task)
		}
		byTask[k.task].Add(this, that)
	}
	clusters := make([]Cluster, len(tasks))
	for i, task := range tasks {
		pt := *byTask[task]
		p.ByTask = append(p.ByTask, pt)
		clusters[i] = Cluster{Sum: float64(pt.Sum()), N: pt.N()}
	}
	var notes []string
	if n := thisDup + baseDup; n > 0 {
		notes = append(notes, fmt.Sprintf("%d (task, attempt) were scored more than once on a side (several jobs of one manifest?); each pair uses the latest", n))
	}
	if changed > 0 {
		notes = append(notes, fmt.Sprintf("%d (task, attempt) left unpaired: the task's files differ between the two runs (task_checksum)", changed))
	}
	p.McNemarP = McNemarExact(p.OnlyBaseline, p.OnlyThis)
	switch {
	case p.Pairs == 0:
		p.Diff, p.DiffCI, p.McNemarP = math.NaN(), Interval{math.NaN(), math.NaN()}, math.NaN()
		notes = append(notes, "no (task, attempt) pair scored under both: nothing to compare")
	case p.Pairs < MinPairs:
		pairs := fmt.Sprintf("%d pairs", p.Pairs)
		if p.Pairs == 1 {
			pairs = "1 pair"
		}
		notes = append(notes, fmt.Sprintf("only %s: too few to say which is better (at least %d are needed)", pairs, MinPairs))
	}
	if p.Pairs > 0 {
		p.Diff = mean(diffs)
		p.DiffCI = PairedBootstrap(diffs, BootstrapResamples, BootstrapSeed)
	}
	p.DiffClustered = clustered(clusters, -1, 1)
	p.DiffHeadline = headline(p.DiffClustered, p.DiffCI, IntervalPairedBootstrap, "pairs")
	p.Warning = strings.Join(notes, "; ")
	return p
}

type pairKey struct {
	task    string
	attempt int
}

// latestScored indexes scored trials by (task, attempt), keeping the one
// that finished last, and counts the keys that had more than one.
func latestScored(trials []*Trial) (map[pairKey]*Trial, int) {
	by := map[pairKey]*Trial{}
	dup := map[pairKey]bool{}
	for _, t := range trials {
		if !t.Outcome.Scored() {
			continue
		}
		k := pairKey{t.TaskName, t.Attempt}
		if prev, ok := by[k]; ok {
			dup[k] = true
			if t.FinishedAt.Before(prev.FinishedAt) || t.FinishedAt.Equal(prev.FinishedAt) && t.Dir < prev.Dir {
				continue
			}
		}
		by[k] = t
	}
	return by, len(dup)
}
