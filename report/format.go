package report

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// The output formats of troupe compare.
const (
	FormatTable    = "table"
	FormatMarkdown = "markdown"
	FormatJSON     = "json"
	FormatHTML     = "html"
)

// Formats lists them, for help and errors.
var Formats = []string{FormatTable, FormatMarkdown, FormatJSON, FormatHTML}

// Write renders a comparison in a format.
func (c *Comparison) Write(w io.Writer, format string) error {
	switch format {
	case FormatTable:
		return c.writeText(w, false)
	case FormatMarkdown:
		return c.writeText(w, true)
	case FormatJSON:
		return c.writeJSON(w)
	case FormatHTML:
		return c.writeHTML(w)
	}
	return fmt.Errorf("format %q is not one of %s", format, strings.Join(Formats, ", "))
}

// writeJSON writes the comparison; infinities and NaNs (no pass, no pair,
// nothing scored) become null, as JSON has no such numbers. The skipped
// results are always there, [] when none, so a reader can rely on them.
func (c *Comparison) writeJSON(w io.Writer) error {
	out := *c
	if out.Skipped == nil {
		out.Skipped = []Unreadable{}
	}
	data, err := json.Marshal(&out)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// MarshalJSON writes a non-finite bound as null.
func (i Interval) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"low": finite(i.Low), "high": finite(i.High)})
}

func finite(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

// MarshalJSON writes as null the figures that do not exist: cost per
// solved with no pass; pass rate, mean reward and costs per trial with
// nothing scored; wall times with no scored trial that has both times.
// Amounts are written to the micro-dollar (modelcall.USD), the cost's
// interval too.
func (c *Condition) MarshalJSON() ([]byte, error) {
	type plain Condition
	var wallMean, wallMedian any
	if c.walls > 0 {
		wallMean, wallMedian = c.WallMean, c.WallMedian
	}
	return json.Marshal(struct {
		*plain
		PassRate           any `json:"pass_rate"`
		MeanReward         any `json:"mean_reward"`
		CostPerTrialMean   any `json:"cost_per_trial_mean_usd"`
		CostPerTrialCI     any `json:"cost_per_trial_mean_ci95"`
		CostPerTrialMedian any `json:"cost_per_trial_median_usd"`
		CostPerSolved      any `json:"cost_per_solved_usd"`
		WallMean           any `json:"wall_mean_ns"`
		WallMedian         any `json:"wall_median_ns"`
	}{(*plain)(c), finite(c.PassRate), finite(c.MeanReward), finiteUSD(c.CostPerTrialMean), usdInterval(c.CostPerTrialCI),
		finiteUSD(c.CostPerTrialMedian), finiteUSD(c.CostPerSolved), wallMean, wallMedian})
}

// finiteUSD is an amount as finite writes a figure: null when it is none,
// else the amount (written to the micro-dollar).
func finiteUSD(v modelcall.USD) any {
	if finite(float64(v)) == nil {
		return nil
	}
	return v
}

// usdInterval is an interval of amounts as Interval writes one, its
// bounds to the micro-dollar.
func usdInterval(i Interval) any {
	return map[string]any{"low": finiteUSD(modelcall.USD(i.Low)), "high": finiteUSD(modelcall.USD(i.High))}
}

// MarshalJSON writes the difference and the p-value as null when there was
// no pair.
func (p Paired) MarshalJSON() ([]byte, error) {
	type plain Paired
	return json.Marshal(struct {
		plain
		Diff     any `json:"pass_rate_diff"`
		McNemarP any `json:"mcnemar_exact_p"`
	}{plain(p), finite(p.Diff), finite(p.McNemarP)})
}

// table writes rows either aligned for a terminal or as a markdown table.
type table struct {
	md   bool
	rows [][]string
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	if len(t.rows) == 0 {
		return
	}
	if t.md {
		for i, r := range t.rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
			if i == 0 {
				seps := make([]string, len(r))
				for j := range seps {
					seps[j] = "---"
					if j > 0 {
						seps[j] = "---:"
					}
				}
				fmt.Fprintf(w, "|%s|\n", strings.Join(seps, "|"))
			}
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

func (c *Comparison) writeText(w io.Writer, md bool) error {
	out := textOut{w: w, md: md}
	c.writeSummary(out)
	c.writeConditions(out)
	c.writePaired(out)
	c.writeIntervals(out)
	c.writeUsage(out)
	c.writeTaskGrid(out)
	return nil
}

// textOut is where the text and Markdown forms of a comparison go, and
// which of the two it is.
type textOut struct {
	w  io.Writer
	md bool
}

// heading starts a section: "## Title" in Markdown, TITLE in text.
func (o textOut) heading(s string) {
	if o.md {
		fmt.Fprintf(o.w, "\n## %s\n\n", s)
	} else {
		fmt.Fprintf(o.w, "\n%s\n", strings.ToUpper(s))
	}
}

// blankInMarkdown ends a paragraph before a table, which Markdown needs.
func (o textOut) blankInMarkdown() {
	if o.md {
		fmt.Fprintln(o.w)
	}
}

// writeSummary writes the title, the counts, the warnings and the results
// left out.
func (c *Comparison) writeSummary(out textOut) {
	w := out.w
	if out.md {
		fmt.Fprintf(w, "# Roster comparison\n\n")
	}
	fmt.Fprintf(w, "Conditions: %d, tasks: %d. Policy: %s.\n", len(c.Conditions), len(c.Tasks), c.Policy)
	for _, warn := range c.Warnings {
		fmt.Fprintf(w, "Warning: %s.\n", warn)
	}
	if len(c.Skipped) > 0 {
		out.heading(skippedHeading(len(c.Skipped)))
		for _, s := range c.Skipped {
			if out.md {
				fmt.Fprintf(w, "- `%s`: %s\n", s.Path, s.Reason)
			} else {
				fmt.Fprintf(w, "%s: %s\n", s.Path, s.Reason)
			}
		}
	}
}

// writeConditions writes the table of conditions.
func (c *Comparison) writeConditions(out textOut) {
	out.heading("Conditions")
	t := &table{md: out.md}
	t.row("condition", "trials", "scored", "passed", "pass rate (95% CI)", "CI", "mean reward", "pass@k", "infra", "verifier err", "cost/trial mean (median)", "cost/solved", "total cost", "wall median")
	for _, cd := range c.Conditions {
		t.row(cd.Name, fmt.Sprint(cd.Trials), fmt.Sprint(cd.Scored), fmt.Sprint(cd.Passed),
			rateCI(cd), headlineName(cd.PassRateHeadline, cd.Scored), num(cd.MeanReward), passAtK(cd.PassAtK), fmt.Sprint(cd.UnscoredInfra), fmt.Sprint(cd.VerifierError),
			costPerTrial(cd), usd(cd.CostPerSolved), usd(cd.TotalCostUSD), dur(cd.WallMedian))
	}
	t.write(out.w)
}

// writePaired writes each condition against the baseline, when there is
// one.
func (c *Comparison) writePaired(out textOut) {
	if len(c.Paired) == 0 {
		return
	}
	out.heading("Against " + c.Baseline)
	fmt.Fprintln(out.w, "Paired on the (task, attempt) both scored; 95% interval as CI says (see Intervals); exact McNemar test.")
	out.blankInMarkdown()
	t := &table{md: out.md}
	t.row("condition", "pairs", "Δ pass rate (95% CI)", "CI", "both / only baseline / only this / neither", "McNemar p", "note")
	for _, p := range c.Paired {
		note := p.Warning
		if note == "" {
			note = "-"
		}
		t.row(p.Condition, fmt.Sprint(p.Pairs), diffCI(p), headlineName(p.DiffHeadline, p.Pairs), fmt.Sprintf("%d / %d / %d / %d", p.BothPassed, p.OnlyBaseline, p.OnlyThis, p.NeitherPass),
			pval(p.McNemarP), note)
	}
	t.write(out.w)
}

// writeIntervals writes every interval computed, and which one is the
// headline, for the pass rates and the paired differences.
func (c *Comparison) writeIntervals(out textOut) {
	w := out.w
	out.heading("Intervals (95%)")
	fmt.Fprintf(w, "Headline: %s. Bootstraps: %d resamples, seed %d.\n", c.IntervalPolicy, c.Bootstrap.Resamples, c.Bootstrap.Seed)
	out.blankInMarkdown()
	t := &table{md: out.md}
	t.row("condition", "tasks", "attempts/task", "Wilson", "task bootstrap", "CR1 (SE, df)", "headline")
	for _, cd := range c.Conditions {
		cl := cd.PassRateClustered
		t.row(cd.Name, fmt.Sprint(cl.Tasks), atMost(cl.MaxAttempts), ciPct(cd.PassRateCI), ciPct(cl.TaskBootstrap),
			cr1(cl, pct), headlineWhy(cd.PassRateHeadline))
	}
	t.write(w)
	if len(c.Paired) == 0 {
		return
	}
	fmt.Fprintln(w)
	t = &table{md: out.md}
	t.row("Δ against "+c.Baseline, "tasks", "pairs/task", "paired bootstrap", "task bootstrap", "CR1 (SE, df)", "headline")
	for _, p := range c.Paired {
		cl := p.DiffClustered
		t.row(p.Condition, fmt.Sprint(cl.Tasks), atMost(cl.MaxAttempts), ciSigned(p.DiffCI), ciSigned(cl.TaskBootstrap),
			cr1(cl, signedPct), headlineWhy(p.DiffHeadline))
	}
	t.write(w)
}

// writeUsage writes the calls, tokens and cost of each role.
func (c *Comparison) writeUsage(out textOut) {
	out.heading("Usage by role")
	t := &table{md: out.md}
	t.row("condition", "role", "calls", "input tokens", "cached", "output tokens", "cost")
	for _, cd := range c.Conditions {
		for _, role := range slices.Sorted(maps.Keys(cd.ByRole)) {
			u := cd.ByRole[role]
			t.row(cd.Name, role, fmt.Sprint(u.Calls), fmt.Sprint(u.InputTokens), fmt.Sprint(u.CachedTokens), fmt.Sprint(u.OutputTokens), usd(u.CostUSD))
		}
	}
	t.write(out.w)
}

// writeTaskGrid writes each task's passes per condition.
func (c *Comparison) writeTaskGrid(out textOut) {
	out.heading("Tasks")
	t := &table{md: out.md}
	header := []string{"task"}
	for _, cd := range c.Conditions {
		header = append(header, cd.Name)
	}
	t.row(header...)
	for _, task := range c.Tasks {
		r := []string{task}
		for _, cd := range c.Conditions {
			cell, ok := c.Grid[task][cd.Name]
			switch {
			case !ok:
				r = append(r, "")
			case cell.Scored == 0:
				r = append(r, fmt.Sprintf("- (%d unscored)", cell.Trials))
			default:
				r = append(r, fmt.Sprintf("%d/%d", cell.Passed, cell.Scored))
			}
		}
		t.row(r...)
	}
	t.write(out.w)
}

// skippedHeading heads the list of results left out as unreadable.
func skippedHeading(n int) string {
	if n == 1 {
		return "Not read: 1 result left out of every figure"
	}
	return fmt.Sprintf("Not read: %d results left out of every figure", n)
}

// rateCI is a pass rate with its headline interval, or "-" with nothing
// scored.
func rateCI(c *Condition) string {
	if math.IsNaN(c.PassRate) {
		return "-"
	}
	return pct(c.PassRate) + " " + ciPct(c.PassRateHeadline.CI)
}

// diffCI is a difference with its headline interval, or "-" with no pair.
func diffCI(p Paired) string {
	if math.IsNaN(p.Diff) {
		return "-"
	}
	return signedPct(p.Diff) + " " + ciSigned(p.DiffHeadline.CI)
}

// ciPct is an interval of rates, "[a, b]", or "-" when there is none.
func ciPct(in Interval) string { return ci(in, pct) }

// ciSigned is an interval of differences, or "-".
func ciSigned(in Interval) string { return ci(in, signedPct) }

func ci(in Interval, f func(float64) string) string {
	if math.IsNaN(in.Low) || math.IsNaN(in.High) {
		return "-"
	}
	return fmt.Sprintf("[%s, %s]", f(in.Low), f(in.High))
}

// cr1 is the CR1 interval with its standard error and degrees of
// freedom, or "-" with fewer than two tasks.
func cr1(c Clustered, f func(float64) string) string {
	if math.IsNaN(c.SE) {
		return "-"
	}
	return fmt.Sprintf("%s (%s, %d)", ci(c.CR1, f), strings.TrimPrefix(signedPct(c.SE), "+"), c.DF)
}

// headlineName names a row's headline interval, "-" with nothing to
// measure (n scored trials or pairs).
func headlineName(h Headline, n int) string {
	if n == 0 {
		return "-"
	}
	return intervalName(h.Interval)
}

// headlineWhy is "name: why", or only why when there is no interval.
func headlineWhy(h Headline) string {
	if math.IsNaN(h.CI.Low) {
		return h.Why
	}
	return intervalName(h.Interval) + ": " + h.Why
}

// atMost is "≤ n", or "-" for none.
func atMost(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("≤ %d", n)
}

// costPerTrial is the mean and median cost per scored trial, or "-".
func costPerTrial(c *Condition) string {
	if math.IsNaN(float64(c.CostPerTrialMean)) {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", usd(c.CostPerTrialMean), usd(c.CostPerTrialMedian))
}

// pct is a rate as a percentage; "-" for none (NaN).
func pct(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func pval(p float64) string {
	if math.IsNaN(p) {
		return "-"
	}
	return fmt.Sprintf("%.3g", p)
}

func signedPct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%+.1f pp", 100*v)
}

func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func usd(u modelcall.USD) string {
	v := float64(u)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "-"
	}
	if math.Abs(v) < 1 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

func dur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func passAtK(m map[int]float64) string { return passAtKSep(m, " ") }

// passAtKSep writes pass@k as "@1 0.33, @2 0.42", inner between each k and
// its value.
func passAtKSep(m map[int]float64, inner string) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("@%d%s%.2f", k, inner, m[k]))
	}
	return strings.Join(parts, ", ")
}
