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

// writeJSON writes the comparison; infinities and NaNs (no pass, no pair)
// become null, as JSON has no such numbers.
func (c *Comparison) writeJSON(w io.Writer) error {
	data, err := json.Marshal(c)
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

// MarshalJSON writes cost per solved as null when nothing was solved.
func (c *Condition) MarshalJSON() ([]byte, error) {
	type plain Condition
	return json.Marshal(struct {
		*plain
		CostPerSolved any `json:"cost_per_solved_usd"`
	}{(*plain)(c), finite(c.CostPerSolved)})
}

// MarshalJSON writes the difference as null when there was no pair.
func (p Paired) MarshalJSON() ([]byte, error) {
	type plain Paired
	return json.Marshal(struct {
		plain
		Diff any `json:"pass_rate_diff"`
	}{plain(p), finite(p.Diff)})
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
	heading := func(s string) {
		if md {
			fmt.Fprintf(w, "\n## %s\n\n", s)
		} else {
			fmt.Fprintf(w, "\n%s\n", strings.ToUpper(s))
		}
	}
	if md {
		fmt.Fprintf(w, "# Roster comparison\n\n")
	}
	fmt.Fprintf(w, "Conditions: %d, tasks: %d. Policy: %s.\n", len(c.Conditions), len(c.Tasks), c.Policy)
	for _, warn := range c.Warnings {
		fmt.Fprintf(w, "Warning: %s.\n", warn)
	}

	heading("Conditions")
	t := &table{md: md}
	t.row("condition", "trials", "scored", "passed", "pass rate (95% CI)", "mean reward", "pass@k", "infra", "verifier err", "cost/trial mean (median)", "cost/solved", "wall median")
	for _, cd := range c.Conditions {
		t.row(cd.Name, fmt.Sprint(cd.Trials), fmt.Sprint(cd.Scored), fmt.Sprint(cd.Passed),
			fmt.Sprintf("%s [%s, %s]", pct(cd.PassRate, cd.Scored), pct(cd.PassRateCI.Low, 1), pct(cd.PassRateCI.High, 1)),
			num(cd.MeanReward, cd.Scored), passAtK(cd.PassAtK), fmt.Sprint(cd.Infra), fmt.Sprint(cd.VerifierError),
			fmt.Sprintf("%s (%s)", usd(cd.CostPerTrialMean), usd(cd.CostPerTrialMedian)), usd(cd.CostPerSolved), dur(cd.WallMedian))
	}
	t.write(w)

	if len(c.Paired) > 0 {
		heading("Against " + c.Baseline)
		fmt.Fprintf(w, "Paired on the (task, attempt) both scored; 95%% interval by paired bootstrap (%d resamples, seed %d); exact McNemar test.\n", c.Bootstrap.Resamples, c.Bootstrap.Seed)
		if md {
			fmt.Fprintln(w)
		}
		t = &table{md: md}
		t.row("condition", "pairs", "Δ pass rate (95% CI)", "both / only baseline / only this / neither", "McNemar p", "note")
		for _, p := range c.Paired {
			diff := "-"
			if !math.IsNaN(p.Diff) {
				diff = fmt.Sprintf("%s [%s, %s]", signedPct(p.Diff), signedPct(p.DiffCI.Low), signedPct(p.DiffCI.High))
			}
			note := p.Warning
			if note == "" {
				note = "-"
			}
			t.row(p.Condition, fmt.Sprint(p.Pairs), diff, fmt.Sprintf("%d / %d / %d / %d", p.BothPassed, p.OnlyBaseline, p.OnlyThis, p.NeitherPass),
				fmt.Sprintf("%.3g", p.McNemarP), note)
		}
		t.write(w)
	}

	heading("Usage by role")
	t = &table{md: md}
	t.row("condition", "role", "calls", "input tokens", "cached", "output tokens", "cost")
	for _, cd := range c.Conditions {
		for _, role := range slices.Sorted(maps.Keys(cd.ByRole)) {
			u := cd.ByRole[role]
			t.row(cd.Name, role, fmt.Sprint(u.Calls), fmt.Sprint(u.InputTokens), fmt.Sprint(u.CachedTokens), fmt.Sprint(u.OutputTokens), usd(u.CostUSD))
		}
	}
	t.write(w)

	heading("Tasks")
	t = &table{md: md}
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
	t.write(w)
	return nil
}

func pct(v float64, n int) string {
	if n == 0 || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func signedPct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%+.1f pp", 100*v)
}

func num(v float64, n int) string {
	if n == 0 || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func usd(v float64) string {
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

func passAtK(m map[int]float64) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("@%d %.2f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
