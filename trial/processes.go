package trial

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/task"
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
	spec := inside.SweepSpec{Grace: r.env.Limits.SweepGrace, Keep: r.keepServices()}
	if r.isolated() {
		for _, ar := range r.agents {
			spec.UIDs = append(spec.UIDs, ar.uid)
		}
		return spec
	}
	spec.Baseline = r.baseline
	return spec
}

// ServicesPolicy is what a job does with the processes the agents leave
// running when their work ends (--services; docs/run.md, "Services").
type ServicesPolicy string

// The services policies.
const (
	// ServicesAuto keeps them for the tasks that declare they need it
	// ([metadata.troupe] services = "keep") and sweeps them for every
	// other. The zero value means it.
	ServicesAuto ServicesPolicy = "auto"
	// ServicesSweep ends every agent process before the verifier: no
	// agent code runs while it does.
	ServicesSweep ServicesPolicy = "sweep"
	// ServicesKeep is Harbor's way: the agents' own processes end, those
	// they detached (a server they started) run on into the verifier,
	// listed in the result, whose verdict says agent code ran during it.
	ServicesKeep ServicesPolicy = "keep"
)

// ParseServicesPolicy reads --services.
func ParseServicesPolicy(s string) (ServicesPolicy, error) {
	switch p := ServicesPolicy(s); p {
	case "", ServicesAuto:
		return ServicesAuto, nil
	case ServicesSweep, ServicesKeep:
		return p, nil
	}
	return "", fmt.Errorf("services policy %q is not %q (keep for the tasks that declare it), %q or %q", s, ServicesAuto, ServicesSweep, ServicesKeep)
}

// keepServices reports whether the trial's sweep keeps the processes the
// agents detached: the job's policy, or the task's declaration under auto.
func (r *run) keepServices() bool {
	switch r.env.Services {
	case ServicesKeep:
		return true
	case ServicesSweep:
		return false
	}
	return r.spec.Task.Services == task.ServicesKeep
}

// recordKept puts the processes the sweep kept on the record: each in
// trial.log, and the verdict marked, since their code ran while the
// verifier did.
func (r *run) recordKept(rep *inside.Report) {
	if !r.keepServices() {
		r.res.Services = string(ServicesSweep)
		return
	}
	r.res.Services = string(ServicesKeep)
	for _, p := range rep.Kept {
		r.log.Warn("kept running into the verifier: an agent's detached process", "pid", p.PID, "uid", p.UID, "cmd", clip.Head(p.Cmd, 200), "listens", strings.Join(p.Listens, ", "))
	}
	r.res.AgentCodeDuringVerifier = len(rep.Kept) > 0
}
