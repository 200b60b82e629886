package report

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
)

//go:embed templates
var templateFS embed.FS

// reportPage is the self-contained report; its parts (style, comparison)
// are shared with troupe view.
var reportPage = template.Must(template.New("report.html").Funcs(funcs).ParseFS(templateFS, "templates/report.html", "templates/parts.html"))

var funcs = template.FuncMap{
	"pct":       pct,
	"signedPct": signedPct,
	"usd":       usd,
	"dur":       dur,
	"num":       num,
	"passAtK":   passAtK,
	"isNaN":     math.IsNaN,
}

// writeHTML writes the report as one self-contained page: inline style and
// SVG, no script, no external URL.
func (c *Comparison) writeHTML(w io.Writer) error {
	var buf bytes.Buffer
	err := reportPage.Execute(&buf, map[string]any{
		"C":        c,
		"PassRate": template.HTML(passRateChart(c)),
		"Pareto":   template.HTML(paretoChart(c)),
		"Grid":     template.HTML(gridChart(c)),
	})
	if err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// The charts are SVG written here: a few shapes need no library.

const chartWidth = 720

func esc(s string) string { return template.HTMLEscapeString(s) }

// passRateChart: a bar per condition with its Wilson interval.
func passRateChart(c *Comparison) string {
	rowH, left, right := 28, 200, 40
	h := rowH*len(c.Conditions) + 40
	plot := float64(chartWidth - left - right)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="pass rate with 95%% intervals">`, chartWidth, h)
	for _, tick := range []float64{0, 0.25, 0.5, 0.75, 1} {
		x := float64(left) + tick*plot
		fmt.Fprintf(&b, `<line x1="%.1f" y1="10" x2="%.1f" y2="%d" class="grid"/><text x="%.1f" y="%d" class="tick">%.0f%%</text>`, x, x, h-25, x, h-8, tick*100)
	}
	for i, cd := range c.Conditions {
		y := 14 + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="label">%s</text>`, left-8, y+14, esc(cd.Name))
		if cd.Scored == 0 {
			fmt.Fprintf(&b, `<text x="%d" y="%d" class="note">no scored trial</text>`, left+4, y+14)
			continue
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="16" class="bar"><title>%s: %s of %d</title></rect>`, left, y+2, cd.PassRate*plot, esc(cd.Name), pct(cd.PassRate, cd.Scored), cd.Scored)
		lo, hi := float64(left)+cd.PassRateCI.Low*plot, float64(left)+cd.PassRateCI.High*plot
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="ci"/><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="ci"/><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="ci"/>`,
			lo, y+10, hi, y+10, lo, y+4, lo, y+16, hi, y+4, hi, y+16)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// paretoChart: mean cost per trial against pass rate, the Pareto front (no
// other condition both cheaper and better) marked.
func paretoChart(c *Comparison) string {
	type pt struct {
		name       string
		cost, rate float64
	}
	var pts []pt
	maxCost := 0.0
	for _, cd := range c.Conditions {
		if cd.Scored == 0 {
			continue
		}
		pts = append(pts, pt{cd.Name, cd.CostPerTrialMean, cd.PassRate})
		maxCost = math.Max(maxCost, cd.CostPerTrialMean)
	}
	if maxCost == 0 {
		maxCost = 1
	}
	maxCost *= 1.25 // room for the labels on the right
	front := map[string]bool{}
	for _, p := range pts {
		dominated := slices.ContainsFunc(pts, func(q pt) bool {
			return q.name != p.name && q.cost <= p.cost && q.rate >= p.rate && (q.cost < p.cost || q.rate > p.rate)
		})
		front[p.name] = !dominated
	}
	h, left, bottom := 320, 60, 40
	pw, ph := float64(chartWidth-left-20), float64(h-bottom-30)
	x := func(cost float64) float64 { return float64(left) + cost/maxCost*pw }
	y := func(rate float64) float64 { return 30 + (1-rate)*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="cost per trial against pass rate">`, chartWidth, h)
	fmt.Fprintf(&b, `<line x1="%d" y1="30" x2="%d" y2="%.1f" class="axis"/><line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="axis"/>`, left, left, 30+ph, left, 30+ph, chartWidth-20, 30+ph)
	for _, tick := range []float64{0, 0.5, 1} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="tick">%.0f%%</text>`, left-6, y(tick)+4, tick*100)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick">%s</text>`, x(tick*maxCost), h-bottom+18, esc(usd(tick*maxCost)))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="axislabel">mean cost per trial</text>`, float64(left)+pw/2, h-6)
	var frontPts []pt
	for _, p := range pts {
		if front[p.name] {
			frontPts = append(frontPts, p)
		}
	}
	slices.SortFunc(frontPts, func(a, b pt) int { return int(math.Copysign(1, a.cost-b.cost)) })
	if len(frontPts) > 1 {
		var coords []string
		for _, p := range frontPts {
			coords = append(coords, fmt.Sprintf("%.1f,%.1f", x(p.cost), y(p.rate)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" class="front"/>`, strings.Join(coords, " "))
	}
	for _, p := range pts {
		class := "point"
		if front[p.name] {
			class = "point pareto"
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="6" class="%s"><title>%s: %s, %s a trial</title></circle><text x="%.1f" y="%.1f" class="plabel">%s</text>`,
			x(p.cost), y(p.rate), class, esc(p.name), pct(p.rate, 1), esc(usd(p.cost)), x(p.cost)+9, y(p.rate)-8, esc(p.name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// gridChart: tasks down, conditions across; each cell's colour is its pass
// fraction.
func gridChart(c *Comparison) string {
	if len(c.Tasks) == 0 || len(c.Conditions) == 0 {
		return ""
	}
	left, top, cw, ch := 220, 110, 90, 22
	w := left + cw*len(c.Conditions) + 10
	h := top + ch*len(c.Tasks) + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart grid-chart" width="%d" viewBox="0 0 %d %d" role="img" aria-label="tasks by conditions">`, w, w, h)
	for j, cd := range c.Conditions {
		fmt.Fprintf(&b, `<text transform="translate(%d,%d) rotate(-35)" class="collabel">%s</text>`, left+j*cw+cw/2, top-8, esc(cd.Name))
	}
	for i, task := range c.Tasks {
		yy := top + i*ch
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="label">%s</text>`, left-8, yy+15, esc(task))
		for j, cd := range c.Conditions {
			cell, ok := c.Grid[task][cd.Name]
			xx := left + j*cw
			switch {
			case !ok:
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" class="cell empty"/>`, xx, yy, cw-2, ch-2)
			case cell.Scored == 0:
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" class="cell unscored"><title>%s, %s: unscored</title></rect>`, xx, yy, cw-2, ch-2, esc(task), esc(cd.Name))
			default:
				f := float64(cell.Passed) / float64(cell.Scored)
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" class="cell" fill="hsl(%.0f, 60%%, 55%%)"><title>%s, %s: %d of %d passed</title></rect><text x="%d" y="%d" class="celltext">%d/%d</text>`,
					xx, yy, cw-2, ch-2, 120*f, esc(task), esc(cd.Name), cell.Passed, cell.Scored, xx+cw/2-1, yy+15, cell.Passed, cell.Scored)
			}
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}
