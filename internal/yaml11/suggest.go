package yaml11

// Suggest returns the candidate that name most likely misspells, or "" when
// none is close: the rule behind "did you mean" in every config format
// troupe reads (YAML here, TOML for tasks).
func Suggest(name string, candidates []string) string {
	best, bestDist := "", len(name)/3+2
	for _, c := range candidates {
		if dist := editDistance(name, c); dist < bestDist {
			best, bestDist = c, dist
		}
	}
	return best
}
