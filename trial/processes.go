package trial

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/troupebench/troupe/runtime/inside"
)

// What the sweep (step 8) ends and what it spares: the agents' processes
// end; the environment's (what the image's entrypoint started) run on into
// the verifier, as under Harbor. Isolated agents are told apart by their
// uids; agents that share root or the task's user are told apart from the
// processes there were before they started (the baseline).

// takeBaseline lists the container's processes before the agents start,
// when the agents' uids will not tell their processes apart (agents that
// run as root or as the task's user, the oracle).
func (r *run) takeBaseline(ctx context.Context) error {
	if r.isolated() {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(callTimeout))
	defer cancel()
	out, err := r.callInside(cctx, "baseline", "", nil)
	if err != nil {
		return fmt.Errorf("list the container's processes before the agents start: %w", err)
	}
	var b inside.Baseline
	if err := json.Unmarshal(out, &b); err != nil {
		return fmt.Errorf("list the container's processes before the agents start: %w", err)
	}
	r.baseline = &b
	r.log.Info("processes before the agents", "count", len(b.Procs))
	return nil
}

// sweepSpec is what the trial's sweep ends: the isolated agents' uids, or
// every process but the baseline's.
func (r *run) sweepSpec() inside.SweepSpec {
	spec := inside.SweepSpec{Grace: r.env.Limits.SweepGrace}
	if r.isolated() {
		for _, ar := range r.agents {
			spec.UIDs = append(spec.UIDs, ar.uid)
		}
		return spec
	}
	spec.Baseline = r.baseline
	return spec
}
