// Package suggest finds what a misspelt name most likely meant: the rule
// behind "did you mean" in every format troupe reads (manifests and the
// config in YAML, tasks in TOML, dataset names in a registry).
package suggest

// Closest returns the candidate that name most likely misspells, or "" when
// none is close: within a third of its length in edits, plus one.
func Closest(name string, candidates []string) string {
	best, bestDist := "", len(name)/3+2
	for _, c := range candidates {
		if dist := Distance(name, c); dist < bestDist {
			best, bestDist = c, dist
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
