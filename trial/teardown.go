package trial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// Steps 8 to 11 (docs/run.md): the sweep, and what the trial
// closes after it.

// finish runs steps 8 to 11: sweep, check, verify, collect, teardown; then fills
// in the result.
func (r *run) finish(ctx context.Context, reason Reason) {
	// Cleanup runs under its own context: a cancelled job still sweeps and
	// removes what it started.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.env.Limits.scale(r.env.Limits.Teardown))
	defer cancel()
	endPhase(&r.res.EnvironmentSetup)
	endPhase(&r.res.AgentSetup)
	endPhase(&r.res.AgentExecution)
	if r.gw != nil {
		// The calls admitted before the end decision (and after a DONE:,
		// those that end the turns it found in progress) are settled before
		// the sweep, so the usage is theirs, every time; later ones are
		// refused.
		r.gw.Freeze(string(reason))
		if n := r.gw.Settle(cctx); n > 0 {
			r.log.Warn("model calls still in flight after the settle grace: the gateway's close ends them", "calls", n)
		}
	}
	var sweepErr error
	if r.container != nil && len(r.agents) > 0 && r.agents[0].proc != nil {
		sweepErr = r.sweep(cctx)
		// Then the services: the agents' own processes are gone, so none
		// can start another there while they are swept.
		sweepErr = errors.Join(sweepErr, r.sweepSidecars(cctx))
		r.log.Info("swept", "ok", sweepErr == nil)
	}
	r.stopWatchers()

	if sweepErr != nil && (reason == Cancelled || reason == InfraError || ctx.Err() != nil) {
		// No verdict is taken anyway; the failure is still on the record.
		r.cleanupError("sweep", sweepErr)
	}
	result := outcome.Cancelled
	switch {
	case reason == Cancelled || ctx.Err() != nil:
		reason = Cancelled
		if r.err == nil {
			r.fail(ErrCancelled, errors.New("the job was interrupted"))
		}
	case reason == InfraError:
		result = outcome.UnscoredInfra
	case reason == ReplayDiverged:
		// What the team did from there is not the recording's: no verdict.
		if sweepErr != nil {
			r.cleanupError("sweep", sweepErr)
		}
	case sweepErr != nil:
		// Agent code may still run: whatever the verifier found now could
		// be the agents' doing during the verification.
		r.fail(ErrSweep, sweepErr)
		result = outcome.UnscoredInfra
	case r.steps != nil:
		result = r.stepsVerdict() // each step was verified (steps.go)
	default:
		result = r.verify(ctx, cctx)
	}
	r.collectEntrypoint(cctx)
	r.closeServices(cctx)
	r.closeTunnel(cctx)
	r.stopEgress(cctx)
	r.closeSinks()
	r.compressConversations()
	if r.container != nil {
		r.phase("teardown", &r.res.Teardown)
		if err := r.container.Remove(cctx); err != nil {
			r.cleanupError("remove the container", err)
		}
		r.log.Info("container removed")
		endPhase(&r.res.Teardown)
	}
	if r.creating {
		// A create cancelled in flight may have made a container whose id
		// never came back: find it by the trial's label.
		r.removeByLabel(cctx)
	}
	r.res.CompletionReason, r.res.Outcome = reason, result
	r.res.FinishedAt = time.Now()
	if r.err != nil {
		r.res.ExceptionInfo = newExceptionInfo(r.errType, r.err, time.Now())
	}
}

// sweep ends every agent process (step 8), then waits for their execs. An
// error means agent code may still run, and the trial is not verified: the
// sweep could not run, or processes survived its KILL.
func (r *run) sweep(ctx context.Context) error {
	spec := r.sweepSpec()
	arg, _ := json.Marshal(spec)
	wctx, cancel := context.WithTimeout(ctx, spec.Grace+r.env.Limits.scale(sweepSlack))
	out, err := r.callInside(wctx, "sweep", string(arg), nil)
	cancel()
	if err != nil {
		return fmt.Errorf("sweep the container: %w", err)
	}
	var rep inside.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return fmt.Errorf("read the sweep's report: %w", err)
	}
	r.res.Sweep = &rep
	r.recordKept(&rep)
	for _, p := range rep.Signalled {
		if p.Note != "" {
			r.log.Warn("swept a process", "pid", p.PID, "uid", p.UID, "cmd", clip.Head(p.Cmd, 200), "note", p.Note)
		}
	}
	if n := len(rep.Survivors); n > 0 {
		return fmt.Errorf("%d processes survived KILL (first: pid %d, %s): the verifier was not run while agent code may still act", n, rep.Survivors[0].PID, clip.Head(rep.Survivors[0].Cmd, 120))
	}
	// The agents' execs end with their processes.
	limit := r.env.Limits.scale(execEndTimeout)
	for i, ar := range r.agents {
		if ar.proc == nil || ar.exited {
			continue
		}
		select {
		case <-ar.proc.Done():
			r.exited(i)
		case <-time.After(limit):
			r.cleanupError("sweep", fmt.Errorf("agent %s's exec did not end within %s of the sweep", ar.ID, limit))
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

func (r *run) stopWatchers() {
	close(r.stop)
	r.watchers.Wait()
	for _, ar := range r.agents {
		if ar.proc != nil {
			ar.proc.Close()
		}
	}
}

// closeServices ends the trial's tunnel, channel and tokens, recording the
// usage and relay counts. It runs once; the verifier runs it before
// tests/test.sh, so that nothing in the container reaches them then.
func (r *run) closeServices(ctx context.Context) {
	if r.servicesClosed {
		return
	}
	r.servicesClosed = true
	r.servicesOff.Store(true)
	if r.egress == nil || r.verifierNet().Mode != task.Allowlist {
		r.closeTunnel(ctx)
	}
	if r.ch != nil {
		stats := r.ch.Stats()
		r.res.Relay = trialdir.RelayCounts{Events: stats.Events, IgnoredDone: stats.IgnoredDone, Refusals: stats.Refusals, IdentityConflicts: stats.IdentityConflicts}
		if ev := r.ch.DoneEvent(); ev != nil {
			r.res.Done = &trialdir.Done{EventID: ev.ID, Content: ev.Content, At: ev.CreatedAt.Time()}
		}
		if err := r.env.Relay.CloseChannel(r.id); err != nil {
			r.cleanupError("close the channel", err)
		}
	}
	if r.gw != nil {
		if err := r.gw.Close(ctx); err != nil {
			r.cleanupError("revoke the gateway tokens", err)
		}
		perAgent, total := r.gw.Usage()
		spent, trialSpent := r.gw.Spent()
		for i := range r.res.Agents {
			r.res.Agents[i].Usage = perAgent[r.res.Agents[i].ID]
			r.res.Agents[i].BudgetExhausted = spent[r.res.Agents[i].ID].Budget
		}
		r.res.TrialBudgetExhausted = trialSpent != nil
		r.res.AgentResult = trialdir.AgentResult{NInputTokens: total.InputTokens, NCacheTokens: total.CachedTokens, NOutputTokens: total.OutputTokens, CostUSD: total.CostUSD, NCalls: total.Calls}
		if rp := r.spec.Replay; rp != nil {
			r.res.Replay = &trialdir.ReplayRecord{Source: rp.Dir, RecordedOutcome: rp.Recorded.Outcome, ReplayReport: r.gw.ReplayReport()}
		}
	}
}

// closeTunnel ends the tunnel, once: before the verifier, unless the
// verifier's proxy goes through it; else after.
func (r *run) closeTunnel(ctx context.Context) {
	if r.tun == nil || r.tunClosed {
		return
	}
	r.tunClosed = true
	if err := r.tun.Close(ctx); err != nil {
		r.cleanupError("close the tunnel", err)
	}
	stats := r.tun.Stats()
	r.res.Tunnel = &stats
}

func (r *run) removeByLabel(ctx context.Context) {
	left, err := r.env.Runtime.List(ctx, map[string]string{runtime.LabelTrial: r.id})
	if err != nil {
		r.cleanupError("look for the trial's containers", err)
		return
	}
	for _, res := range left {
		if r.container != nil && res.ID == r.container.ID() && res.Kind == runtime.KindContainer {
			continue // removed above; a failure there is recorded
		}
		if err := r.env.Runtime.Remove(ctx, res); err != nil {
			r.cleanupError("remove "+res.String(), err)
		}
	}
}
