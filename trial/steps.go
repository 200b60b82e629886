package trial

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// A multi-step task (task.Step, docs/run.md "Multi-step tasks") runs as
// Harbor runs it: one container for every step, and for each step in
// order: its workdir/ copied into the working folder and its setup.sh run;
// the team launched (or the oracle's solve.sh run) with the step's
// instruction; the agents' work ended and swept; the step's verifier run
// (the task's tests/, then the step's over them); its rewards read. A step
// below its min_reward stops the steps after it. The trial's reward is
// rolled up from the steps' (multi_step_reward_strategy).
//
// The team is launched again for each step, in the same channel (the
// transcript holds the whole trial): the sweep before each verifier ends
// every agent process, and Harbor too runs its agent afresh per step. The
// channel starts a new round (relay.Channel.NextRound) so that the new
// team is not replayed the earlier steps' messages, and the gateway is
// thawed for it (llm.Trial.Thaw). The relay and the gateway stay open
// between steps, closed to the container while a verifier runs.

// ErrStepSetup is a step's workdir/setup.sh that failed: the step's agents
// and verifier do not run, nor the steps after it.
const ErrStepSetup ErrorKind = "StepSetupError"

// stepsRun is a multi-step trial's progress.
type stepsRun struct {
	// current is the step under way; nil before the first.
	current *task.Step
	// baseline are the system changes (systemChanges) found after the
	// last step's verifier: troupe's own (/tests) and the verifiers', not
	// the next step's agents'.
	baseline map[string]bool
	// ended is set when a step's failure is the trial's outcome
	// (unscored_infra, verifier_error, cancelled).
	ended outcome.Outcome
}

// runSteps runs the task's steps in order and returns the completion
// reason of the last whose agents ran. The trial's verdict is stepsVerdict.
func (r *run) runSteps(ctx context.Context) Reason {
	r.steps = &stepsRun{}
	var reason Reason
	for i := range r.spec.Task.Steps {
		st := &r.spec.Task.Steps[i]
		r.steps.current = st
		r.res.StepResults = append(r.res.StepResults, trialdir.StepResult{StepName: st.Name})
		sr := &r.res.StepResults[len(r.res.StepResults)-1]
		stepReason, more := r.runStep(ctx, i, st, sr)
		if stepReason != "" {
			reason = stepReason
		}
		if !more {
			break
		}
	}
	if reason == "" {
		reason = AgentsExited // no step's agents ran: its setup failed first
	}
	return reason
}

// runStep runs one step; more says whether the next may run. A reason of
// Cancelled or InfraError is the trial's: finish sweeps what still runs.
func (r *run) runStep(ctx context.Context, i int, st *task.Step, sr *trialdir.StepResult) (reason Reason, more bool) {
	r.log.Info("step", "step", st.Name, "n", i+1, "of", len(r.spec.Task.Steps))
	if i > 0 && !r.spec.Oracle {
		r.ch.NextRound()
		if !r.gw.Thaw() {
			r.log.Info("the trial's budget is spent: the steps end", "step", st.Name)
			return "", false
		}
	}
	sr.Setup = &trialdir.Timing{}
	r.phase("step "+st.Name+": setup", sr.Setup)
	err := r.stepSetup(ctx, st)
	endPhase(sr.Setup)
	switch {
	case ctx.Err() != nil:
		r.fail(ErrCancelled, context.Cause(ctx))
		return Cancelled, false
	case err != nil && !slices.ContainsFunc(r.res.StepResults, func(s trialdir.StepResult) bool { return s.VerifierResult != nil }):
		// Nothing was scored yet: the task's environment is broken, as
		// with a failed healthcheck, whatever the team would do.
		r.fail(ErrStepSetup, err)
		sr.ExceptionInfo = newExceptionInfo(ErrStepSetup, err, time.Now())
		return InfraError, false
	case err != nil:
		// As Harbor: the step's failure, not the trial's; the steps end,
		// and the reward is rolled up from those that ran.
		r.log.Warn("step setup failed: the steps end", "step", st.Name, "err", err.Error())
		sr.ExceptionInfo = newExceptionInfo(ErrStepSetup, err, time.Now())
		return "", false
	}

	before := r.usage()
	reason = r.stepAgents(ctx, st, sr)
	if reason == Cancelled || reason == InfraError {
		return reason, false
	}
	sr.CompletionReason = reason
	if err := r.endStepAgents(ctx); err != nil {
		if ctx.Err() != nil {
			r.fail(ErrCancelled, context.Cause(ctx))
			return Cancelled, false
		}
		// Agent code may still run: no verdict, as for a trial of one step.
		r.fail(ErrSweep, err)
		r.steps.ended = outcome.UnscoredInfra
		return reason, false
	}
	if !r.spec.Oracle {
		after := r.usage()
		sr.AgentResult = &trialdir.AgentResult{NInputTokens: after.NInputTokens - before.NInputTokens, NCacheTokens: after.NCacheTokens - before.NCacheTokens,
			NOutputTokens: after.NOutputTokens - before.NOutputTokens, CostUSD: after.CostUSD - before.CostUSD, NCalls: after.NCalls - before.NCalls}
		if ev := r.ch.DoneEvent(); ev != nil {
			sr.Done = &trialdir.Done{EventID: ev.ID, Content: ev.Content, At: ev.CreatedAt.Time()}
		}
	}

	switch verdict := r.verifyStep(ctx, st, sr); verdict {
	case outcome.Cancelled:
		return Cancelled, false
	case outcome.Passed, outcome.Failed:
	default:
		r.steps.ended = verdict
		if r.err != nil {
			sr.ExceptionInfo = newExceptionInfo(r.errType, r.err, time.Now())
		}
		return reason, false
	}
	if why := belowMinReward(st.MinReward, sr.VerifierResult); why != "" {
		sr.BelowMinReward = why
		r.log.Info("below the step's min_reward: the steps end", "step", st.Name, "why", why)
		return reason, false
	}
	// A spent budget of the lead's or the trial's ends the team's work
	// for good.
	return reason, reason != BudgetExhausted
}

// usage is what the trial's agents used so far.
func (r *run) usage() trialdir.AgentResult {
	if r.gw == nil {
		return trialdir.AgentResult{}
	}
	_, total := r.gw.Usage()
	return trialdir.AgentResult{NInputTokens: total.InputTokens, NCacheTokens: total.CachedTokens, NOutputTokens: total.OutputTokens, CostUSD: total.CostUSD, NCalls: total.Calls}
}

// stepSetup copies the step's workdir/ into the working folder (root's,
// as Harbor's copy makes them; shared with isolated agents like the rest
// of it) and runs its setup.sh there as Harbor does: bash setup.sh, as
// the agents' user (the task's [agent] user, else the image's), within
// the step's agent timeout. A setup.sh that exits non-zero fails the step.
func (r *run) stepSetup(ctx context.Context, st *task.Step) error {
	if st.WorkdirDir == "" {
		return nil
	}
	tree, err := treeFiles(st.WorkdirDir, r.workdir)
	if err != nil {
		return fmt.Errorf("step %s: workdir/: %w", st.Name, err)
	}
	// The working folder itself keeps its owner and mode.
	tree = slices.DeleteFunc(tree, func(f runtime.File) bool { return f.Path == r.workdir })
	if err := r.unpack(ctx, tree, r.isolated()); err != nil {
		return fmt.Errorf("step %s: copy workdir/ in: %w", st.Name, err)
	}
	r.log.Info("step workdir copied in", "step", st.Name, "files", len(tree))
	if !st.Setup {
		return nil
	}
	user := r.img.User
	if r.taskAgent != nil {
		user = r.taskAgent.Spec()
	}
	var out syncbuf.Buffer
	p, err := r.container.Exec(ctx, runtime.ExecSpec{
		Cmd: harborScript(r.workdir + "/setup.sh"), Env: proxyEnv(r.agentNet()), User: user, WorkDir: r.workdir, Stdout: &out, Stderr: &out,
	})
	if err != nil {
		return fmt.Errorf("step %s: start workdir/setup.sh: %w", st.Name, err)
	}
	defer p.Close()
	limit := r.env.Limits.scale(st.AgentTimeout)
	wctx, cancel := context.WithTimeout(ctx, limit)
	code, err := p.Wait(wctx)
	cancel()
	said := clip.Tail(strings.TrimSpace(string(r.secrets.Scrub(out.Bytes()))), 600)
	r.log.Info("step setup.sh", "step", st.Name, "code", code, "output", said)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("step %s: workdir/setup.sh did not finish within %s", st.Name, limit)
	case err != nil:
		return fmt.Errorf("step %s: workdir/setup.sh: %w", st.Name, err)
	case code != 0:
		return fmt.Errorf("step %s: workdir/setup.sh exited %d: %s", st.Name, code, said)
	}
	return nil
}

// unpack places files in the container through troupe's prepare call, and
// shares the working folder with isolated agents again.
func (r *run) unpack(ctx context.Context, files []runtime.File, share bool) error {
	var opts struct {
		Share string `json:"share,omitempty"`
		GID   int    `json:"gid,omitempty"`
	}
	if share {
		opts.Share, opts.GID = r.workdir, agentGID
	}
	arg, _ := json.Marshal(opts)
	var tar bytes.Buffer
	if err := runtime.WriteTar(&tar, files); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(callTimeout))
	defer cancel()
	_, err := r.callInside(cctx, "prepare", string(arg), tar.Bytes())
	return err
}

// stepAgents launches the team (or the oracle) for the step, with its
// instruction, and waits for the end of their work.
func (r *run) stepAgents(ctx context.Context, st *task.Step, sr *trialdir.StepResult) Reason {
	broken := func(kind ErrorKind, err error) Reason { return r.broken(ctx, kind, err) }
	sr.AgentSetup = &trialdir.Timing{}
	r.phase("step "+st.Name+": agent_setup", sr.AgentSetup)
	spanStart(&r.res.AgentSetup, sr.AgentSetup)
	type part struct {
		kind ErrorKind
		do   func(context.Context) error
	}
	parts := []part{{ErrReadiness, r.waitGone}, {ErrAgentStart, r.launch}, {ErrReadiness, r.waitReady}}
	if r.spec.Oracle {
		parts = []part{{ErrContainer, func(ctx context.Context) error { return r.stageSolution(ctx, st) }}, {ErrAgentStart, r.launchOracle}}
	}
	for _, p := range parts {
		if err := p.do(ctx); err != nil {
			return broken(p.kind, err)
		}
	}
	endPhase(sr.AgentSetup)
	spanEnd(&r.res.AgentSetup, sr.AgentSetup)
	sr.AgentExecution = &trialdir.Timing{}
	r.phase("step "+st.Name+": agent_execution", sr.AgentExecution)
	spanStart(&r.res.AgentExecution, sr.AgentExecution)
	var reason Reason
	if r.spec.Oracle {
		reason = r.watchOracle(ctx)
	} else {
		reason = r.watch(ctx, st.Instruction)
	}
	endPhase(sr.AgentExecution)
	spanEnd(&r.res.AgentExecution, sr.AgentExecution)
	return reason
}

// spanStart and spanEnd keep a trial's phase as the span of its steps'.
func spanStart(trial, step *trialdir.Timing) {
	if trial.StartedAt == nil {
		trial.StartedAt = step.StartedAt
	}
}

func spanEnd(trial, step *trialdir.Timing) { trial.FinishedAt = step.FinishedAt }

// stageSolution gives the oracle the step's solution/ (else the task's) at
// /solution, over what an earlier step's left, as Harbor does.
func (r *run) stageSolution(ctx context.Context, st *task.Step) error {
	dir := st.SolutionDir
	if dir == "" {
		dir = r.spec.Task.SolutionDir
	}
	files, err := treeFiles(dir, solutionDir)
	if err != nil {
		return fmt.Errorf("step %s: %w", st.Name, err)
	}
	if err := r.unpack(ctx, files, false); err != nil {
		return fmt.Errorf("step %s: stage the solution: %w", st.Name, err)
	}
	return nil
}

// waitGone waits until none of the agents of the step before holds a
// connection to the relay (their processes were swept): an agent launched
// again with the same key would otherwise be refused as an identity
// conflict.
func (r *run) waitGone(ctx context.Context) error {
	limit := r.env.Limits.scale(r.env.Limits.Ready)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		ready, _, changed := r.ch.Readiness()
		if len(ready) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return fmt.Errorf("agents %s of the step before were still connected %s after their sweep", strings.Join(ready, ", "), limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// endStepAgents ends the step's agents' work as finish ends a trial's:
// their model calls settled, every agent process swept (and the services'
// processes the agents left), their execs ended. The next step launches
// a new team.
func (r *run) endStepAgents(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.env.Limits.scale(r.env.Limits.Teardown))
	defer cancel()
	if r.gw != nil {
		if n := r.gw.Settle(cctx); n > 0 {
			r.log.Warn("model calls still in flight after the settle grace", "calls", n)
		}
	}
	err := errors.Join(r.sweep(cctx), r.sweepSidecars(cctx))
	close(r.stop)
	r.watchers.Wait()
	for _, ar := range r.agents {
		if ar.proc != nil {
			ar.proc.Close()
		}
		ar.proc, ar.exited = nil, false
	}
	r.stop = make(chan struct{})
	r.log.Info("step swept", "ok", err == nil)
	return err
}

// verifyStep runs the step's verifier: the task's tests/ then the step's
// staged in /tests, its test.sh (the step's, else the task's) run as the
// step's verifier user with its env and limit; the relay and the gateway
// closed to the container meanwhile. Its files are then moved to
// steps/<name>/, and its rewards into the step's result.
func (r *run) verifyStep(ctx context.Context, st *task.Step, sr *trialdir.StepResult) outcome.Outcome {
	var tests []string
	if info, err := os.Stat(r.spec.Task.TestsDir); err == nil && info.IsDir() {
		tests = append(tests, r.spec.Task.TestsDir)
	}
	if st.TestsDir != "" {
		tests = append(tests, st.TestsDir)
	}
	user := r.verifier
	if st.VerifierUser != r.spec.Task.VerifierUser {
		u, err := r.lookupUser(ctx, st.VerifierUser)
		if err != nil {
			if ctx.Err() != nil {
				return outcome.Cancelled
			}
			r.fail(ErrUser, fmt.Errorf("step %s: [steps.verifier] user: %w", st.Name, err))
			return outcome.UnscoredInfra
		}
		user = u
	}
	sr.Verifier = &trialdir.Timing{}
	spanStart(&r.res.Verifier, sr.Verifier)
	r.servicesOff.Store(true)
	verdict := r.runVerifier(ctx, verification{
		tests: tests, limit: r.env.Limits.scale(st.VerifierTimeout), env: st.VerifierEnv, user: user,
		closeServices: func() {}, timing: sr.Verifier,
	})
	spanEnd(&r.res.Verifier, sr.Verifier)
	sr.VerifierResult, sr.Reward = r.res.VerifierResult, r.res.Reward
	r.res.VerifierResult, r.res.Reward = nil, nil
	if err := r.archiveStep(st.Name); err != nil {
		r.cleanupError("step "+st.Name+": move its files to "+trialdir.Step(st.Name), err)
	}
	if verdict != outcome.Passed && verdict != outcome.Failed {
		return verdict
	}
	if err := r.clearVerifier(ctx); err != nil {
		r.fail(ErrContainer, err)
		return outcome.UnscoredInfra
	}
	r.systemBaseline(ctx)
	if err := r.agentNetwork(ctx); err != nil {
		r.fail(ErrContainer, err)
		return outcome.UnscoredInfra
	}
	r.servicesOff.Store(false)
	return verdict
}

// archiveStep moves what the step's verifier left (verifier/, artifacts/)
// to steps/<name>/, as Harbor does, so the next step's start empty.
func (r *run) archiveStep(name string) error {
	dst := filepath.Join(r.spec.Dir, filepath.FromSlash(trialdir.Step(name)))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, d := range []string{trialdir.Verifier, trialdir.Artifacts} {
		err := os.Rename(filepath.Join(r.spec.Dir, d), filepath.Join(dst, d))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// clearVerifier empties /tests and /logs/verifier after a step's verifier
// (their files are copied out): the next step's agents do not see them,
// and its verifier's staging finds only what they left.
func (r *run) clearVerifier(ctx context.Context) error {
	arg, _ := json.Marshal([]map[string]any{{"dir": testsDir, "uid": 0, "gid": 0, "mode": 0o755}, {"dir": verifierLogs, "uid": 0, "gid": 0, "mode": 0o755}})
	cctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(callTimeout))
	defer cancel()
	if _, err := r.callInside(cctx, "reset", string(arg), nil); err != nil {
		return fmt.Errorf("empty /tests and /logs/verifier after the step's verifier: %w", err)
	}
	return nil
}

// systemBaseline records the system changes present after a step's verifier:
// troupe's /tests and what the verifier itself installed are not the next
// step's agents' doing.
func (r *run) systemBaseline(ctx context.Context) {
	files, ok, err := r.changedSystemFiles(ctx, r.container, false, func(ctx context.Context, name, arg string) ([]byte, error) {
		return r.callInside(ctx, name, arg, nil)
	})
	if !ok || err != nil {
		return
	}
	r.steps.baseline = map[string]bool{}
	for _, f := range files {
		r.steps.baseline[f] = true
	}
}

// newSinceLastStep leaves out of a check's system changes those present
// after the step before's verifier (baseline).
func (r *run) newSinceLastStep(files []string) []string {
	if r.steps == nil || r.steps.baseline == nil {
		return files
	}
	return slices.DeleteFunc(files, func(f string) bool { return r.steps.baseline[f] })
}

// agentNetwork gives the container the agents' network again after a
// step's verifier had its own (verifierNetwork).
func (r *run) agentNetwork(ctx context.Context) error {
	if r.containerNetwork() == runtime.NetworkBridge && r.verifierNet().Mode != r.agentNet().Mode {
		if err := r.container.SetOnline(ctx, r.agentsOnline()); err != nil {
			return fmt.Errorf("give the agents their network again (%s): %w", r.agentNet().Mode, err)
		}
	}
	if r.egress != nil {
		r.egress.SetHosts(r.agentNet().AllowedHosts)
	}
	return nil
}

// taskAgentTimeout is the agents' limit the task sets: the step's under
// way, else the task's.
func (r *run) taskAgentTimeout() time.Duration {
	if r.steps != nil && r.steps.current != nil {
		return r.steps.current.AgentTimeout
	}
	return r.spec.Task.AgentTimeout
}

// belowMinReward says how a step's rewards miss its min_reward ("" when
// they do not, or it has none), as Harbor checks it: a key missing, or no
// verifier result at all, is below any threshold.
func belowMinReward(min map[string]float64, vr *trialdir.VerifierResult) string {
	for _, k := range slices.Sorted(maps.Keys(min)) {
		got, ok := math.Inf(-1), false
		if vr != nil {
			got, ok = vr.Rewards[k]
		}
		switch {
		case !ok:
			return fmt.Sprintf("%s missing, min_reward %v", k, min[k])
		case got < min[k]:
			return fmt.Sprintf("%s=%v below min_reward %v", k, got, min[k])
		}
	}
	return ""
}

// rollUp is the trial's rewards from its steps', as Harbor derives them:
// "final", the last step's that ran; "mean", each key's mean over the
// steps with a verifier result (a key a step lacks counting 0). nil when
// there is none.
func rollUp(strategy string, steps []trialdir.StepResult) *trialdir.VerifierResult {
	if len(steps) == 0 {
		return nil
	}
	if strategy == task.RewardFinal {
		return steps[len(steps)-1].VerifierResult
	}
	var scored []map[string]float64
	keys := map[string]bool{}
	for _, s := range steps {
		if s.VerifierResult != nil {
			scored = append(scored, s.VerifierResult.Rewards)
			for k := range s.VerifierResult.Rewards {
				keys[k] = true
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	out := map[string]float64{}
	for k := range keys {
		sum := 0.0
		for _, rw := range scored {
			sum += rw[k]
		}
		out[k] = sum / float64(len(scored))
	}
	return &trialdir.VerifierResult{Rewards: out}
}

// stepsVerdict is a multi-step trial's outcome, once its steps ran: the
// rolled-up reward's (passed at 1 or more), unless a step's failure was
// the trial's.
func (r *run) stepsVerdict() outcome.Outcome {
	vr := rollUp(r.spec.Task.RewardStrategy, r.res.StepResults)
	r.res.VerifierResult = vr
	if vr != nil {
		reward := mainReward(vr.Rewards)
		r.res.Reward = &reward
	}
	switch {
	case r.steps.ended != "":
		return r.steps.ended
	case vr == nil:
		r.fail(ErrRewardFile, errors.New("no step that ran has a reward to roll up into the trial's"))
		return outcome.VerifierError
	case *r.res.Reward >= 1:
		return outcome.Passed
	}
	return outcome.Failed
}
