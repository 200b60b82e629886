package report

import (
	"fmt"

	"github.com/troupebench/troupe/modelcall"
)

// Replays takes the replays (troupe replay) out of trials, or, with
// include, keeps them at what they spent: a replay runs a recorded trial
// again, so counted as one more trial of its roster it would double that
// trial's evidence, and its recorded cost is no new spend. The note says
// what was done, for the report's warnings; "" when trials held no replay.
func Replays(trials []*Trial, include bool) ([]*Trial, string) {
	var kept []*Trial
	n := 0
	for _, t := range trials {
		if t.Replay == nil {
			kept = append(kept, t)
			continue
		}
		n++
		if include {
			kept = append(kept, atLiveCost(t))
		}
	}
	switch {
	case n == 0:
		return kept, ""
	case include:
		return kept, fmt.Sprintf("%d %s counted as trials of their rosters (--include-replays), at what their live calls cost: a replay's recorded calls cost nothing", n, plural(n, "replay is", "replays are"))
	}
	return kept, fmt.Sprintf("%d %s of recorded trials left out: a replay is no new trial of its roster (--include-replays counts them, at their live cost)", n, plural(n, "replay", "replays"))
}

// atLiveCost is a replay's trial with the cost its live calls had, per
// agent and in all.
func atLiveCost(t *Trial) *Trial {
	c := *t
	c.Agents = append(c.Agents[:0:0], t.Agents...)
	live := map[string]modelcall.USD{}
	var total modelcall.USD
	if t.Replay.ReplayReport != nil { // a replay whose result has no report played nothing live
		for _, a := range t.Replay.Agents {
			live[a.ID] += a.LiveCostUSD
			total += a.LiveCostUSD
		}
	}
	for i := range c.Agents {
		c.Agents[i].Usage.CostUSD = live[c.Agents[i].ID]
	}
	c.AgentResult.CostUSD = total
	return &c
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
