// Package textdiff shows how two texts differ, line by line, in the
// unified format people read in code review: a replay's report shows a
// request that left its recording this way.
package textdiff

import (
	"fmt"
	"strings"
)

// maxCells bounds the table the longest common subsequence is found in;
// past it, the differing middles are shown whole, one removed and one
// added, which is still right, only less tidy.
const maxCells = 4 << 20

// Unified returns the lines of a that b does not keep (-) and the lines b
// adds (+), with context lines of each around them, under the two names,
// in at most maxLines lines (the rest counted). Equal texts give "".
func Unified(nameA, nameB, a, b string, context, maxLines int) string {
	if a == b {
		return ""
	}
	x, y := lines(a), lines(b)
	ops := diff(x, y)
	var out []string
	out = append(out, "--- "+nameA, "+++ "+nameB)
	for _, h := range hunks(ops, context) {
		out = append(out, fmt.Sprintf("@@ -%d,%d +%d,%d @@", h.a+1, h.na, h.b+1, h.nb))
		for _, o := range ops[h.from:h.to] {
			out = append(out, string(o.kind)+o.text)
		}
	}
	if maxLines > 0 && len(out) > maxLines {
		n := len(out) - maxLines
		out = append(out[:maxLines], fmt.Sprintf("… %d more lines", n))
	}
	return strings.Join(out, "\n") + "\n"
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// op is a line kept (' '), removed ('-') or added ('+').
type op struct {
	kind byte
	text string
}

// diff is a shortest edit of x into y: the common prefix and suffix
// first, then a longest common subsequence of what is left.
func diff(x, y []string) []op {
	p := 0
	for p < len(x) && p < len(y) && x[p] == y[p] {
		p++
	}
	s := 0
	for s < len(x)-p && s < len(y)-p && x[len(x)-1-s] == y[len(y)-1-s] {
		s++
	}
	var ops []op
	for _, l := range x[:p] {
		ops = append(ops, op{' ', l})
	}
	ops = append(ops, middle(x[p:len(x)-s], y[p:len(y)-s])...)
	for _, l := range x[len(x)-s:] {
		ops = append(ops, op{' ', l})
	}
	return ops
}

func middle(x, y []string) []op {
	var ops []op
	if (len(x)+1)*(len(y)+1) > maxCells {
		for _, l := range x {
			ops = append(ops, op{'-', l})
		}
		for _, l := range y {
			ops = append(ops, op{'+', l})
		}
		return ops
	}
	// lcs[i][j] is the longest common subsequence of x[i:] and y[j:].
	w := len(y) + 1
	lcs := make([]int32, (len(x)+1)*w)
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, op{' ', x[i]})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
			ops = append(ops, op{'-', x[i]})
			i++
		default:
			ops = append(ops, op{'+', y[j]})
			j++
		}
	}
	return ops
}

// hunk is a run of ops to show: ops[from:to], starting at line a of the
// first text (na lines of it) and line b of the second (nb lines).
type hunk struct {
	from, to     int
	a, na, b, nb int
}

// hunks groups the changes with context lines around them, merging groups
// whose context would touch.
func hunks(ops []op, context int) []hunk {
	var hs []hunk
	for i := 0; i < len(ops); i++ {
		if ops[i].kind == ' ' {
			continue
		}
		from := max(i-context, 0)
		// Extend past changes until context kept lines in a row follow.
		end, kept := i, 0
		for j := i; j < len(ops) && kept <= 2*context; j++ {
			if ops[j].kind == ' ' {
				kept++
			} else {
				kept, end = 0, j
			}
		}
		to := min(end+1+context, len(ops))
		if n := len(hs); n > 0 && from <= hs[n-1].to {
			from = hs[n-1].from
			hs = hs[:n-1]
		}
		hs = append(hs, hunk{from: from, to: to})
		i = to - 1
	}
	// Line numbers: count each text's lines before and in each hunk.
	for k := range hs {
		a, b := 0, 0
		for _, o := range ops[:hs[k].from] {
			if o.kind != '+' {
				a++
			}
			if o.kind != '-' {
				b++
			}
		}
		hs[k].a, hs[k].b = a, b
		for _, o := range ops[hs[k].from:hs[k].to] {
			if o.kind != '+' {
				hs[k].na++
			}
			if o.kind != '-' {
				hs[k].nb++
			}
		}
	}
	return hs
}
