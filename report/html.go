package report

import (
	"bytes"
	"cmp"
	"embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/modelcall"
)

//go:embed templates
var templateFS embed.FS

// reportPage is the self-contained report; its parts (style, comparison)
// are shared with troupe view.
var reportPage = template.Must(template.New("report.html").Funcs(funcs).ParseFS(templateFS, "templates/report.html", "templates/parts.html"))

var funcs = template.FuncMap{
	"pct":       pct,
	"signedPct": signedPct,
	// A page shows a call's cost (a float64) and sums (modelcall.USD):
	// any float is an amount here.
	"usd":            func(v reflect.Value) string { return usd(modelcall.USD(v.Float())) },
	"dur":            dur,
	"num":            num,
	"pval":           pval,
	"passAtK":        passAtK,
	"passAtKHTML":    passAtKHTML,
	"isNaN":          math.IsNaN,
	"rateCI":         rateCI,
	"costCI":         costPerTrial,
	"diffCI":         diffCI,
	"ciPct":          ciPct,
	"ciSigned":       ciSigned,
	"cr1Pct":         func(c Clustered) string { return cr1(c, pct) },
	"cr1Signed":      func(c Clustered) string { return cr1(c, signedPct) },
	"headlineName":   headlineName,
	"headlineWhy":    headlineWhy,
	"atMost":         atMost,
	"skippedHeading": skippedHeading,
}

// passAtKHTML is passAtK for a table cell that may wrap: between the k,
// never inside one ("@2" on one line and its value on the next).
func passAtKHTML(m map[int]float64) string { return passAtKSep(m, "\u00a0") }

// chartData is what the "comparison" template needs: the comparison and
// its charts.
func chartData(c *Comparison) map[string]any {
	return map[string]any{
		"C":        c,
		"PassRate": template.HTML(passRateChart(c)),
		"Pareto":   template.HTML(paretoChart(c)),
		"Grid":     template.HTML(gridChart(c)),
	}
}

// writeHTML writes the report as one self-contained page: inline style and
// SVG, no script, no external URL.
func (c *Comparison) writeHTML(w io.Writer) error {
	var buf bytes.Buffer
	err := reportPage.Execute(&buf, chartData(c))
	if err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// The charts are SVG written here: a few shapes need no library. Every
// label is placed inside the viewBox, so nothing is cut at any width.

const chartWidth = 720

// Names longer than this are clipped in a chart (the full name is in the
// shape's title); tables show them whole.
const chartNameChars = 26

func esc(s string) string { return template.HTMLEscapeString(s) }

// rateTicks are the pass-rate axis ticks: 0% to 100% by 20.
var rateTicks = []float64{0, 0.2, 0.4, 0.6, 0.8, 1}

// passRateChart: a bar per condition with its headline interval (Wilson's
// or the task-clustered one, as the table beside it).
func passRateChart(c *Comparison) string {
	rowH, left, right := 28, 200, 40
	h := rowH*len(c.Conditions) + 40
	plot := float64(chartWidth - left - right)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="pass rate with 95%% intervals">`, chartWidth, h)
	for _, tick := range rateTicks {
		x := float64(left) + tick*plot
		fmt.Fprintf(&b, `<line x1="%.1f" y1="10" x2="%.1f" y2="%d" class="grid"/><text x="%.1f" y="%d" class="tick">%.0f%%</text>`, x, x, h-25, x, h-8, tick*100)
	}
	for i, cd := range c.Conditions {
		y := 14 + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="label">%s<title>%s</title></text>`, left-8, y+14, esc(clip.Head(cd.Name, chartNameChars)), esc(cd.Name))
		if cd.Scored == 0 {
			fmt.Fprintf(&b, `<text x="%d" y="%d" class="note">no scored trial (%d trials, %s spent)</text>`, left+4, y+14, cd.Trials, esc(usd(cd.TotalCostUSD)))
			continue
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="16" class="bar"><title>%s: %s of %d</title></rect>`, left, y+2, cd.PassRate*plot, esc(cd.Name), pct(cd.PassRate), cd.Scored)
		in := cd.PassRateHeadline.CI
		lo, hi := float64(left)+in.Low*plot, float64(left)+in.High*plot
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="ci"/><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="ci"/><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="ci"/>`,
			lo, y+10, hi, y+10, lo, y+4, lo, y+16, hi, y+4, hi, y+16)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// niceTicks are axis ticks from 0 to the first tick at or above top, in
// steps of 1, 2 or 5 times a power of ten, at most maxSteps steps: round
// values a reader can interpolate between. The step's decimals are
// returned for the labels. A top of 0 or less gives the ticks of 1.
func niceTicks(top float64, maxSteps int) (ticks []float64, decimals int) {
	if !(top > 0) || math.IsInf(top, 0) {
		top = 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(top/float64(maxSteps))))
	var m float64
	for _, m = range []float64{1, 2, 5, 10} {
		if m*mag*float64(maxSteps) >= top*(1-1e-9) {
			break
		}
	}
	step := m * mag
	n := int(math.Ceil(top/step - 1e-9))
	for i := range n + 1 {
		// i*m*mag, rounded at the step's digit: 3*0.1 is 0.3, not
		// 0.30000000000000004.
		ticks = append(ticks, float64(i)*step)
	}
	decimals = max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	scale := math.Pow(10, float64(decimals))
	for i := range ticks {
		ticks[i] = math.Round(ticks[i]*scale) / scale
	}
	return ticks, decimals
}

// paretoPoint is a condition on the cost/pass-rate chart.
type paretoPoint struct {
	name           string
	cost, rate     float64
	costCI, rateCI Interval
	scored         int
}

// paretoFront marks the points no other point beats on both axes (cheaper
// or as cheap, and better or as good, one of them strictly), on the means.
func paretoFront(pts []paretoPoint) map[string]bool {
	front := map[string]bool{}
	for _, p := range pts {
		dominated := slices.ContainsFunc(pts, func(q paretoPoint) bool {
			return q.name != p.name && q.cost <= p.cost && q.rate >= p.rate && (q.cost < p.cost || q.rate > p.rate)
		})
		front[p.name] = !dominated
	}
	return front
}

// paretoChart: mean cost per scored trial against pass rate, each point
// with its two 95% intervals (bootstrap on cost, the headline one on pass
// rate), the Pareto front (no other condition both cheaper and better)
// joined.
func paretoChart(c *Comparison) string {
	var pts []paretoPoint
	var left []string
	top := 0.0
	for _, cd := range c.Conditions {
		if cd.Scored == 0 {
			left = append(left, cd.Name)
			continue
		}
		pts = append(pts, paretoPoint{cd.Name, float64(cd.CostPerTrialMean), cd.PassRate, cd.CostPerTrialCI, cd.PassRateHeadline.CI, cd.Scored})
		top = math.Max(top, math.Max(float64(cd.CostPerTrialMean), cd.CostPerTrialCI.High))
	}
	ticks, decimals := niceTicks(top, 5)
	maxCost := ticks[len(ticks)-1]
	front := paretoFront(pts)

	const h, marginL, marginR, marginT, marginB = 340, 64, 44, 16, 48
	pw, ph := float64(chartWidth-marginL-marginR), float64(h-marginT-marginB)
	x := func(cost float64) float64 { return marginL + cost/maxCost*pw }
	y := func(rate float64) float64 { return marginT + (1-rate)*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="cost per trial against pass rate">`, chartWidth, h)
	for _, t := range rateTicks {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/><text x="%d" y="%.1f" class="tick ytick">%.0f%%</text>`,
			marginL, y(t), marginL+pw, y(t), marginL-8, y(t)+4, t*100)
	}
	for _, t := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" class="grid"/><text x="%.1f" y="%.1f" class="tick xtick">$%.*f</text>`,
			x(t), marginT, x(t), marginT+ph, x(t), marginT+ph+16, decimals, t)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" class="axis"/><line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/>`,
		marginL, marginT, marginL, marginT+ph, marginL, marginT+ph, marginL+pw, marginT+ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="axislabel">mean cost per scored trial (USD)</text>`, marginL+pw/2, h-8)
	fmt.Fprintf(&b, `<text transform="translate(14,%.1f) rotate(-90)" class="axislabel">pass rate</text>`, marginT+ph/2)

	var frontPts []paretoPoint
	for _, p := range pts {
		if front[p.name] {
			frontPts = append(frontPts, p)
		}
	}
	slices.SortFunc(frontPts, func(a, b paretoPoint) int { return cmp.Compare(a.cost, b.cost) })
	if len(frontPts) > 1 {
		var coords []string
		for _, p := range frontPts {
			coords = append(coords, fmt.Sprintf("%.1f,%.1f", x(p.cost), y(p.rate)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" class="front"/>`, strings.Join(coords, " "))
	}
	for _, p := range pts {
		writeParetoPoint(&b, p, front[p.name], x, y, marginL+pw)
	}
	b.WriteString(`</svg>`)
	if len(left) > 0 {
		fmt.Fprintf(&b, `<p class="note">Not on the chart, with no scored trial: %s.</p>`, esc(strings.Join(left, ", ")))
	}
	return b.String()
}

// writeParetoPoint draws a condition: its interval on each axis, the
// point, and its name, on the left of the point when the right would leave
// the chart.
func writeParetoPoint(b *strings.Builder, p paretoPoint, front bool, x, y func(float64) float64, right float64) {
	px, py := x(p.cost), y(p.rate)
	fmt.Fprintf(b, `<g class="ci2"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+
		`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/></g>`,
		x(p.costCI.Low), py, x(p.costCI.High), py, // cost interval
		px, y(p.rateCI.Low), px, y(p.rateCI.High), // pass-rate interval
		px-4, y(p.rateCI.Low), px+4, y(p.rateCI.Low),
		px-4, y(p.rateCI.High), px+4, y(p.rateCI.High))
	class := "point"
	if front {
		class = "point pareto"
	}
	name := clip.Head(p.name, chartNameChars)
	fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="6" class="%s"><title>%s: %s [%s, %s] of %d scored; %s [%s, %s] a trial</title></circle>`,
		px, py, class, esc(p.name), pct(p.rate), pct(p.rateCI.Low), pct(p.rateCI.High), p.scored,
		esc(usd(modelcall.USD(p.cost))), esc(usd(modelcall.USD(p.costCI.Low))), esc(usd(modelcall.USD(p.costCI.High))))
	// About 7 px a character at the labels' 12 px.
	lx, anchor := px+9, "start"
	if lx+7*float64(utf8.RuneCountInString(name)) > right {
		lx, anchor = px-9, "end"
	}
	ly := py - 8
	if ly < 12 {
		ly = py + 18 // a point at 100%: its name below, inside the chart
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="plabel" text-anchor="%s">%s</text>`, lx, ly, anchor, esc(name))
}

// gridColor is a cell's colour: red for no pass, through yellow, to green
// for every scored attempt passed.
func gridColor(fraction float64) string {
	return fmt.Sprintf("hsl(%.0f, 60%%, 55%%)", 120*fraction)
}

// gridChart: tasks down, conditions across; each cell's colour is its pass
// fraction, and a legend under the grid says so.
func gridChart(c *Comparison) string {
	if len(c.Tasks) == 0 || len(c.Conditions) == 0 {
		return ""
	}
	left, top, cw, ch := 220, 110, 90, 22
	gridBottom := top + ch*len(c.Tasks)
	w := max(left+cw*len(c.Conditions)+10, legendWidth)
	h := gridBottom + 16 + legendHeight
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart grid-chart" width="%d" viewBox="0 0 %d %d" role="img" aria-label="tasks by conditions">`, w, w, h)
	for j, cd := range c.Conditions {
		fmt.Fprintf(&b, `<text transform="translate(%d,%d) rotate(-35)" class="collabel">%s<title>%s</title></text>`, left+j*cw+cw/2, top-8, esc(clip.Head(cd.Name, 20)), esc(cd.Name))
	}
	for i, task := range c.Tasks {
		yy := top + i*ch
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="label">%s<title>%s</title></text>`, left-8, yy+15, esc(clip.Head(task, 30)), esc(task))
		for j, cd := range c.Conditions {
			cell, ok := c.Grid[task][cd.Name]
			xx := left + j*cw
			switch {
			case !ok:
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" class="cell empty"><title>%s, %s: not run</title></rect>`, xx, yy, cw-2, ch-2, esc(task), esc(cd.Name))
			case cell.Scored == 0:
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" class="cell unscored"><title>%s, %s: %d trials, none scored</title></rect><text x="%d" y="%d" class="celltext">-</text>`,
					xx, yy, cw-2, ch-2, esc(task), esc(cd.Name), cell.Trials, xx+cw/2-1, yy+15)
			default:
				f := float64(cell.Passed) / float64(cell.Scored)
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" class="cell" fill="%s"><title>%s, %s: %d of %d passed</title></rect><text x="%d" y="%d" class="celltext">%d/%d</text>`,
					xx, yy, cw-2, ch-2, gridColor(f), esc(task), esc(cd.Name), cell.Passed, cell.Scored, xx+cw/2-1, yy+15, cell.Passed, cell.Scored)
			}
		}
	}
	writeGridLegend(&b, 8, gridBottom+16)
	b.WriteString(`</svg>`)
	return b.String()
}

const legendWidth, legendHeight = 700, 40

// writeGridLegend explains the grid's cells: what the text and the colours
// mean, and the two kinds of grey.
func writeGridLegend(b *strings.Builder, x, y int) {
	fmt.Fprintf(b, `<g class="legend" aria-label="legend"><text x="%d" y="%d" class="legendtext">cell: passed/scored attempts; colour: the share passed</text>`, x, y+10)
	items := []struct{ class, fill, label string }{
		{"cell", gridColor(0), "none passed"},
		{"cell", gridColor(0.5), "half"},
		{"cell", gridColor(1), "all passed"},
		{"cell unscored", "", "none scored (-)"},
		{"cell empty", "", "not run"},
	}
	for i, it := range items {
		xx, yy := x+i*125, y+20
		fill := ""
		if it.fill != "" {
			fill = ` fill="` + it.fill + `"`
		}
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="18" height="14" class="%s"%s/><text x="%d" y="%d" class="legendtext">%s</text>`, xx, yy, it.class, fill, xx+24, yy+11, it.label)
	}
	b.WriteString(`</g>`)
}
