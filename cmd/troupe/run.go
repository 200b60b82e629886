package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/examples"
	"github.com/troupebench/troupe/internal/termsafe"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/personas"
	"github.com/troupebench/troupe/relay"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trial/outcome"
)

type runOptions struct {
	manifests    []string
	tasks        []string
	attempts     int
	concurrency  int
	out          string
	json         bool
	retries      int
	multiplier   float64
	readyTimeout time.Duration
	strict       bool
	rebuild      bool
	network      trial.NetworkPolicy
	record       trial.RecordMode
	// datasets are --dataset NAME@VERSION, read from registry.
	datasets      []string
	registry      string
	datasetLimits datasetLimits
	// oracle adds the oracle condition (each task's solution/solve.sh);
	// check reports per task whether it passed (troupe tasks check).
	oracle, check bool
	recordFlag    string
	// dryRun checks everything a run would before its first container,
	// and starts nothing.
	dryRun bool
	// untilDecided runs the job in rounds until each condition is decided
	// against baseline (sequential.go).
	untilDecided        bool
	baseline            string
	delta, alpha, power float64
	maxAttempts         int
	// pilot is a job whose paired results size the test's bets and the
	// fixed design it is measured against.
	pilot string
}

func newRunCmd(a *app) *cobra.Command {
	var opts runOptions
	cmd := &cobra.Command{
		Use:   "run MANIFEST... --tasks PATH...",
		Short: "Run trials: every manifest on every task, in containers, with results on disk",
		Long: `Run a job: each manifest (a roster) on each task, --attempts times, at most
--concurrency trials at once. A trial starts a container from the task's image (with
the network its task asks for, as Harbor gives it; --network none takes it away), launches the team inside it with troupe's reference
agent, posts the task to the orchestrator over the embedded relay, waits for its
signed DONE: (or the deadline, a spent budget, or every agent exiting), sweeps every
agent process, runs the task's tests/test.sh, and writes the trial's folder. Models are
reached through the metering gateway: mock/<scenario> endpoints run offline; others are
configured in the config file (docs/config.md).

Tasks are in Harbor's format (task.toml, instruction.md, environment/Dockerfile,
tests/test.sh); --tasks takes a task folder or a folder of tasks.

Results go to --out (default jobs/job-<digest of the inputs>, so the same command
finds its own folder): config.json, lock.json, result.json, job.log and one folder per
trial, <task>__<condition>__<attempt> (docs/run.md). Running the same command again
resumes: finished trials are kept, the rest are run; a manifest or task that changed
since is refused. Only unscored_infra trials (the harness failed, not the team) are
retried, --retries times.

--until-decided runs the job in rounds instead (round r is attempt r of every task, for
the baseline and each condition not yet decided) and after each round tests each
condition against --baseline with an anytime-valid test (docs/compare.md): once it
says better, worse, or within ±--delta, the condition is not run again. The job's
sequential.json (and result.json) records each decision, its round and interval, and
what was saved against the fixed design; the same command resumes it without looking
at a round twice; troupe compare shows its anytime-valid intervals.

Ctrl+C stops launching, cancels the running trials, removes their containers and
writes what finished; a second Ctrl+C removes the containers at once and exits.

Exit status: 0 when every trial has a verdict (whatever its score: passed,
failed or verifier_error), 3 when the job finished but some trials could not be
measured (unscored_infra after their retries: the harness failed them, not the
team; the same command retries them), 1 when the job was interrupted or could not
run, 2 for a usage error.`,
		Example: `  troupe run examples/manifests/team.yaml --tasks examples/tasks/hello-world
  troupe run solo.yaml team.yaml --tasks ~/datasets/tb2 --attempts 5 --concurrency 8 --out jobs/tb2
  troupe run team.yaml --tasks tasks/ --json | jq 'select(.type=="trial_finished")'
  troupe run solo.yaml team.yaml --tasks ~/datasets/tb2 --until-decided --delta 0.1 --max-attempts 10`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !opts.oracle {
				return errors.New(cmd.CommandPath() + " needs at least one manifest file, or --oracle")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.manifests = args
			if len(opts.tasks) == 0 && len(opts.datasets) == 0 {
				return &usageError{command: cmd.CommandPath(), err: errors.New("give tasks: --tasks PATH (a task folder with task.toml, instruction.md, environment/, tests/, or a folder of tasks), or --dataset NAME@VERSION (a registry's dataset: troupe datasets list)")}
			}
			if opts.attempts < 1 || opts.concurrency < 1 || opts.retries < 0 || opts.multiplier <= 0 {
				return &usageError{command: cmd.CommandPath(), err: errors.New("--attempts and --concurrency must be at least 1, --retries at least 0, --timeout-multiplier above 0")}
			}
			root, cfg, err := a.artifactRoot(cmd)
			if err != nil {
				return err
			}
			if opts.network, err = a.networkPolicy(cmd); err != nil {
				return err
			}
			if opts.registry, err = a.registry(cmd); err != nil {
				return err
			}
			f := cmd.Flags()
			if opts.untilDecided && f.Changed("attempts") {
				return &usageError{command: cmd.CommandPath(), err: errors.New("--until-decided runs as many rounds (attempts) as it needs: bound them with --max-attempts, not --attempts")}
			}
			for _, name := range []string{"baseline", "delta", "alpha", "power", "max-attempts", "pilot"} {
				if f.Changed(name) && !opts.untilDecided {
					return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--%s is a setting of --until-decided", name)}
				}
			}
			if opts.record, err = trial.ParseRecordMode(opts.recordFlag); err != nil {
				return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--record: %w", err)}
			}
			return runRun(cmd.Context(), a, cmd, opts, root, cfg, os.Args)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&opts.tasks, "tasks", nil, "a task folder or a folder of tasks (repeat for more)")
	f.StringArrayVar(&opts.datasets, "dataset", nil, "a dataset of the registry, NAME@VERSION (NAME alone: its newest), its tasks fetched at their pinned commits (repeat for more; troupe datasets list shows them)")
	registryFlag(cmd)
	datasetLimitFlags(cmd, &opts.datasetLimits)
	f.IntVarP(&opts.attempts, "attempts", "k", 1, "trials per manifest and task")
	f.IntVarP(&opts.concurrency, "concurrency", "n", 4, "trials running at once")
	f.StringVarP(&opts.out, "out", "o", "", "the job folder (default jobs/job-<digest of the manifest and task paths>)")
	f.BoolVar(&opts.json, "json", false, "print NDJSON events on standard output instead of the progress bar and table")
	f.IntVar(&opts.retries, "retries", 2, "reruns of a trial that ended unscored_infra")
	f.Float64Var(&opts.multiplier, "timeout-multiplier", 1, "scale every phase's timeout (build, readiness, agent, verifier, teardown)")
	f.DurationVar(&opts.readyTimeout, "ready-timeout", trial.DefaultLimits.Ready, "how long the agents have to authenticate and subscribe")
	f.BoolVar(&opts.strict, "strict", false, "refuse tasks whose task.toml has keys Harbor does not define (by default: a warning, and they are ignored)")
	f.BoolVar(&opts.rebuild, "rebuild", false, "build each task environment again, the engine's layer cache off, even when an image built from the same folder and base images exists (once per job; its trials share the build)")
	f.BoolVar(&opts.oracle, "oracle", false, "also run the condition \"oracle\": each task's own solution/solve.sh in place of a team (Harbor's oracle agent); with no manifest, only it")
	networkFlag(cmd)
	runtimeFlag(cmd)
	f.BoolVar(&opts.dryRun, "dry-run", false, "check everything the run would check before its first container (manifests, stacks and their digests, tasks, endpoints) and start nothing")
	f.BoolVar(&opts.untilDecided, "until-decided", false, "run in rounds (every task once more per round) and stop scheduling a condition once an anytime-valid test against --baseline says better, worse or within ±--delta (docs/compare.md)")
	f.StringVar(&opts.baseline, "baseline", "", "with --until-decided: the condition the others are tested against (default: the first manifest's)")
	f.Float64Var(&opts.delta, "delta", 0, "with --until-decided: the difference in pass rate that matters, in (0, 1): within ±delta is equivalent, and the test is sized to detect it")
	f.Float64Var(&opts.alpha, "alpha", 0.05, "with --until-decided: the chance of any wrong decision, over all rounds")
	f.Float64Var(&opts.power, "power", 0.8, "with --until-decided: the power the fixed design it is measured against has at --delta; 1 − power is the level of its futility stop")
	f.StringVar(&opts.pilot, "pilot", "", "with --until-decided: a job folder whose paired results (the same baseline) size the test's first bets and the fixed design; default: the most a pair's variance can be")
	f.IntVar(&opts.maxAttempts, "max-attempts", 0, "with --until-decided: at most this many rounds (attempts per task); default twice the fixed design's")
	f.StringVar(&opts.recordFlag, "record", string(trial.RecordFull), "what each trial keeps of its model calls: full (every call whole, request and answer, in agents/<id>/llm-conversation.jsonl.gz), meta (metering lines only), none")
	artifactRootFlag(cmd)
	return cmd
}

// stacksFor are the stacks a manifest's agents may name: the config
// file's, and those of stacks.yaml beside the manifest.
func stacksFor(cfg *config, manifestPath string) (stack.Set, error) {
	beside, err := stack.LoadFile(filepath.Join(filepath.Dir(manifestPath), stack.FileName))
	if err != nil {
		return nil, err
	}
	return stack.Merge(cfg.stacks, beside)
}

// checkStacks resolves the stack of every agent of a team and checks its
// files against their digests.
func checkStacks(tm *manifest.Team, stacks stack.Set) error {
	var errs []error
	checked := map[string]bool{}
	for _, a := range tm.Agents {
		st, err := stacks.Resolve(string(a.Harness))
		if err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", a.ID, err))
			continue
		}
		if !checked[st.Name] {
			checked[st.Name] = true
			if _, err := st.Verify(); err != nil {
				errs = append(errs, fmt.Errorf("agent %s: %w", a.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// networkFlag adds --network, which run and tasks check share.
func networkFlag(cmd *cobra.Command) {
	cmd.Flags().String("network", string(trial.NetworkTask), `"task": each phase gets the network its task asks (public, no-network, or an allowlist through troupe's proxy); "none": no trial gets any network`)
}

// networkPolicy resolves --network with troupe's precedence (the flag,
// TROUPE_NETWORK, the config file's network).
func (a *app) networkPolicy(cmd *cobra.Command) (trial.NetworkPolicy, error) {
	v, err := a.settings(cmd, "network")
	if err != nil {
		return "", err
	}
	p, err := trial.ParseNetworkPolicy(v.GetString("network"))
	if err != nil {
		return "", &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--network (or TROUPE_NETWORK, or network: in the config file): %w", err)}
	}
	return p, nil
}

// refuseKeysInTaskEnv refuses a task whose [environment] env takes a value
// from a host variable that holds an endpoint's real API key: the value
// would be in the trial container, where no real key may go.
func refuseKeysInTaskEnv(tasks []*task.Task, cfg *config) error {
	keyVars := map[string]string{}
	for name, ep := range cfg.endpoints {
		if ep.APIKeyEnv != "" {
			keyVars[ep.APIKeyEnv] = name
		}
	}
	var errs []error
	for _, t := range tasks {
		for _, v := range slices.Sorted(maps.Keys(t.FromHost)) {
			if ep, ok := keyVars[v]; ok {
				errs = append(errs, fmt.Errorf("task %s: task.toml takes ${%s}, the API key of endpoint %s, into the trial container: real keys never enter trial containers (agents reach models through troupe's gateway)", t.Dir, v, ep))
			}
		}
	}
	return errors.Join(errs...)
}

// loadCondition loads and verifies a manifest, its personas and its
// agents' stacks.
func loadCondition(path, artifactRoot string, cfg *config) (trial.Condition, error) {
	m, err := manifest.Load(path)
	if err == nil {
		dir := artifactRoot
		if dir == "" {
			dir = manifest.DefaultDir(path)
		}
		var tm *manifest.Team
		if tm, err = m.Verify(manifest.Sources{Dir: dir, Builtin: personas.FS()}); err == nil {
			var stacks stack.Set
			if stacks, err = stacksFor(cfg, path); err == nil {
				if err = checkStacks(tm, stacks); err == nil {
					return trial.Condition{Path: path, Team: tm, Stacks: stacks}, nil
				}
			}
		}
	}
	return trial.Condition{}, fmt.Errorf("%s is not valid (troupe validate %s):\n%w", path, path, err)
}

func runRun(ctx context.Context, a *app, cmd *cobra.Command, opts runOptions, artifactRoot string, cfg *config, argv []string) (err error) {
	// Everything that can be checked is checked before any container starts.
	var conds []trial.Condition
	var errs []error
	for _, path := range opts.manifests {
		cond, err := loadCondition(path, artifactRoot, cfg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		conds = append(conds, cond)
	}
	if opts.oracle {
		conds = append(conds, trial.OracleCondition())
	}
	// --dataset's tasks are folders in the cache, read as --tasks reads its own.
	limits, err := opts.datasetLimits.limits()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	fetched, err := datasetTasks(ctx, a.stderr, a.progress(), opts.datasets, opts.registry, limits)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	opts.tasks = append(opts.tasks, fetched...)
	tasks, terr := task.Find(opts.tasks, task.Options{Strict: opts.strict})
	errs = append(errs, terr, refuseKeysInTaskEnv(tasks, cfg))
	if opts.oracle {
		for _, t := range tasks {
			if t.SolutionDir == "" {
				errs = append(errs, fmt.Errorf("task %s has no solution/solve.sh: the oracle has nothing to run there", t.Dir))
			}
		}
	}
	for _, t := range tasks {
		for _, w := range t.Warnings {
			fmt.Fprintf(a.stderr, "warning: %s\n", w)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	out := opts.out
	if out == "" {
		inputs := opts.manifests
		if opts.oracle {
			inputs = append(slices.Clone(inputs), "(oracle)")
		}
		out = defaultJobDir(inputs, opts.tasks)
	}

	var seq *trial.Sequential
	if opts.untilDecided {
		if seq, opts.attempts, err = sequential(a.stderr, conds, len(tasks), opts); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "deciding against %s: at most %d rounds (the fixed design at power %.2f: %d)\n", seq.Baseline, opts.attempts, opts.power, seq.Params.FixedRounds)
	}
	if opts.dryRun {
		return dryRun(ctx, a, cfg, conds, tasks, opts)
	}
	// tasks check --json prints its own report on standard output.
	res, err := runJob(ctx, a, cmd, cfg, opts, trial.JobSpec{
		Dir: out, Conditions: conds, Tasks: tasks, Attempts: opts.attempts, Concurrency: opts.concurrency,
		Retries: opts.retries, Command: argv, Sequential: seq,
	}, opts.json && !opts.check)
	if res == nil {
		return err
	}
	if opts.check {
		return cmp.Or(err, printCheck(a, out, res, opts.json))
	}
	if !opts.json {
		printSummary(a.stdout, out, res)
		if res.Sequential != nil {
			printDecisions(a.stdout, res.Sequential)
		}
	}
	if err != nil { // the job ran, and closing the relay or gateway failed
		return err
	}
	return jobExit(ctx, a, res, opts.retries)
}

// sequential is the test of --until-decided and the rounds it may run,
// against the fixed design that has --power at --delta. A pair's variance
// sizes both: the pilot's (the largest of its conditions', with the same
// baseline), or else that of two rosters passing half the time
// independently, the most it can be: a plan errs on the safe side.
func sequential(stderr io.Writer, conds []trial.Condition, tasks int, opts runOptions) (*trial.Sequential, int, error) {
	if len(conds) < 2 {
		return nil, 0, &usageError{command: "troupe run", err: errors.New("--until-decided compares manifests with a baseline: give two manifests or more")}
	}
	if !(opts.delta > 0 && opts.delta < 1) {
		return nil, 0, &usageError{command: "troupe run", err: fmt.Errorf("--until-decided needs --delta, the difference in pass rate that matters, in (0, 1) (e.g. --delta 0.1); got %v", opts.delta)}
	}
	baseline := cmp.Or(opts.baseline, conds[0].Team.Manifest.Condition)
	if !slices.ContainsFunc(conds, func(c trial.Condition) bool { return c.Team.Manifest.Condition == baseline }) {
		return nil, 0, &usageError{command: "troupe run", err: fmt.Errorf("--baseline %q is none of the manifests' conditions", baseline)}
	}
	v, err := decide.VarianceFromRates(0.5, 0.5)
	if err != nil {
		return nil, 0, err
	}
	if opts.pilot != "" {
		if v, err = pilotVariance(stderr, opts.pilot, baseline); err != nil {
			return nil, 0, fmt.Errorf("--pilot %s: %w", opts.pilot, err)
		}
	}
	fixed, err := decide.PlanRounds(v, decide.Goal{Delta: opts.delta, Alpha: opts.alpha, Power: opts.power, Tasks: tasks, Scope: decide.ScopeTasks})
	if err != nil {
		return nil, 0, fmt.Errorf("--until-decided: the fixed design: %w", err)
	}
	rounds := cmp.Or(opts.maxAttempts, 2*fixed.Attempts)
	p := decide.Params{Alpha: opts.alpha, Delta: opts.delta, MaxRounds: rounds, FixedRounds: fixed.Attempts, Futility: 1 - opts.power, PriorVariance: v.Total()}
	if err := p.Validate(); err != nil {
		return nil, 0, &usageError{command: "troupe run", err: fmt.Errorf("--until-decided: %w", err)}
	}
	return &trial.Sequential{Baseline: baseline, Params: p}, rounds, nil
}

// pilotVariance is the largest paired variance of a pilot job's
// conditions against baseline, as troupe plan measures it.
func pilotVariance(stderr io.Writer, dir, baseline string) (decide.Variance, error) {
	inputs, base, _, _, err := pilotInputs(stderr, []string{dir}, baseline)
	if err != nil {
		return decide.Variance{}, err
	}
	var v decide.Variance
	var errs []error
	for _, in := range inputs {
		if in.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", in.name, in.err))
		} else if in.variance.Total() > v.Total() {
			v = in.variance
		}
	}
	if v.Total() <= 0 {
		return v, fmt.Errorf("no condition of the pilot has a paired variance against %s: %w", base, errors.Join(errs...))
	}
	return v, nil
}

// printDecisions says what a sequential job decided, when, and what it
// saved against the fixed design.
func printDecisions(w io.Writer, rec *decide.JobRecord) {
	fmt.Fprintf(w, "decisions against %s (%s, α %.2f, ±%.2f; anytime-valid: %s):\n", rec.Baseline, rec.Method, rec.Params.Alpha, rec.Params.Delta, rec.Citation)
	for _, name := range slices.Sorted(maps.Keys(rec.Conditions)) {
		d := rec.Conditions[name].Decision
		when := fmt.Sprintf("at round %d", d.Round)
		if d.Verdict == decide.Undecided {
			when = fmt.Sprintf("after %d of at most %d rounds", d.Rounds, rec.Params.MaxRounds)
		}
		fmt.Fprintf(w, "  %-20s %s %s; difference in (%+.2f, %+.2f)\n", name, strings.ReplaceAll(string(d.Verdict), "_", " "), when, d.Interval.Low, d.Interval.High)
	}
	if rec.FixedDesignTrials > 0 {
		fmt.Fprintf(w, "  %d trials run; the fixed design (%d rounds at the planned power) runs %d\n", rec.TrialsRun, rec.Params.FixedRounds, rec.FixedDesignTrials)
	}
}

// jobExit is the exit status of a job that ran: 1 when it was
// interrupted, 3 when some trials could not be measured.
func jobExit(ctx context.Context, a *app, res *trial.JobResult, retries int) error {
	if ctx.Err() != nil {
		fmt.Fprintf(a.stderr, "interrupted: %d of %d trials are done; run the same command to finish the job\n", done(res), res.Total)
		return &reportedError{code: exitFailed}
	}
	if n := unmeasured(res); n > 0 {
		fmt.Fprintf(a.stderr, "%d of %d trials could not be measured: the harness failed them (unscored_infra) after %d retries; "+
			"their folders' trial.log and result.json say why; run the same command again to retry them\n", n, res.Total, retries)
		return &reportedError{code: exitUnmeasured}
	}
	return nil
}

// runJob runs a job on the local Docker Engine with the embedded relay and
// gateway: what is left of earlier crashed runs is reaped first, and a
// second interrupt removes the job's containers at once. asJSON prints
// NDJSON events instead of the progress bar.
func runJob(ctx context.Context, a *app, cmd *cobra.Command, cfg *config, opts runOptions, spec trial.JobSpec, asJSON bool) (res *trial.JobResult, err error) {
	rt, err := a.openRuntime(ctx, cmd, runtimeOptions{rebuild: opts.rebuild})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := rt.Close(context.WithoutCancel(ctx)); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close the %s runtime: %w", rt.Name(), cerr))
		}
	}()
	reapDead(ctx, a.stderr, rt)
	// A killed troupe's last requests can still be in the engine: what they
	// create lands after the reap above, while this job runs. The job's end
	// reaps again.
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		reapDead(cctx, a.stderr, rt)
	}()
	bin, _, err := selfBinary(ctx)
	if err != nil {
		return nil, err
	}

	rl := relay.New()
	if err := rl.Open(ctx); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	gw := llm.New(cfg.endpoints)
	// A replay that never goes live asks no upstream: it needs no key.
	gw.KeysOptional = spec.Replay != nil && spec.Replay.OnDivergence != modelcall.DivergeLive
	gw.Scenarios = examples.Scenarios()
	if cfg.path != "" {
		gw.ScenarioDir = filepath.Dir(cfg.path)
	}
	if err := gw.Open(ctx); err != nil {
		rl.Close(context.Background())
		return nil, fmt.Errorf("gateway: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if cerr := gw.Close(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close the gateway: %w", cerr))
		}
		if cerr := rl.Close(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close the relay: %w", cerr))
		}
	}()

	jobID := filepath.Base(spec.Dir) + "-" + fmt.Sprint(time.Now().Unix())
	limits := trial.DefaultLimits
	limits.Multiplier, limits.Ready = opts.multiplier, opts.readyTimeout
	env := &trial.Env{Runtime: rt, Relay: rl, Gateway: gw, Binary: bin, JobID: jobID, Version: shortVersion(), Limits: limits, Network: opts.network, Record: opts.record}

	// The first signal cancels ctx (main's NotifyContext); a second one
	// removes this job's containers at once and exits.
	stopForce := forceOnSecondSignal(a.stderr, rt, jobID)
	defer stopForce()
	// A reader of the progress that goes away (--json | head) must not kill
	// troupe before it removes its containers: writes then fail instead,
	// and the job runs on, its results on disk.
	signal.Ignore(syscall.SIGPIPE)
	defer signal.Reset(syscall.SIGPIPE)

	show := newProgress(a, asJSON)
	res, err = trial.RunJob(ctx, env, spec, trial.Progress{Trial: show.trial, Job: show.job})
	show.end()
	return res, err
}

// dryRun is troupe run's pre-flight alone: the job's plan and every
// endpoint checked on a gateway that is opened and closed; no container,
// no job folder.
func dryRun(ctx context.Context, a *app, cfg *config, conds []trial.Condition, tasks []*task.Task, opts runOptions) error {
	gw := llm.New(cfg.endpoints)
	gw.Scenarios = examples.Scenarios()
	if cfg.path != "" {
		gw.ScenarioDir = filepath.Dir(cfg.path)
	}
	if err := gw.Open(ctx); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer gw.Close(context.WithoutCancel(ctx))
	n, err := trial.Preflight(&trial.Env{Gateway: gw}, trial.JobSpec{Dir: "(dry run)", Conditions: conds, Tasks: tasks, Attempts: opts.attempts})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "pre-flight passed: %d trials (%d conditions × %d tasks × %d attempts); nothing was started\n", n, len(conds), len(tasks), opts.attempts)
	return nil
}

// unmeasured counts the trials that ended unscored_infra.
func unmeasured(res *trial.JobResult) int {
	n := 0
	for _, c := range res.Conditions {
		n += c.UnscoredInfra
	}
	return n
}

func done(res *trial.JobResult) int {
	s := res.Stats
	return s.Completed + s.Errored
}

// defaultJobDir names a job after its inputs, so that the same command
// finds the same folder and resumes.
func defaultJobDir(manifests, tasks []string) string {
	h := sha256.New()
	for _, list := range [][]string{manifests, tasks} {
		var abs []string
		for _, p := range list {
			a, err := filepath.Abs(p)
			if err != nil {
				a = p
			}
			abs = append(abs, a)
		}
		slices.Sort(abs)
		fmt.Fprintf(h, "%s\x00", strings.Join(abs, "\x00"))
	}
	return filepath.Join("jobs", "job-"+hex.EncodeToString(h.Sum(nil))[:12])
}

// selfBin keeps selfBinary's answer: the binary (65 MB) is read and
// hashed once per process, though a Kubernetes run asks for it twice.
var selfBin struct {
	sync.Mutex
	bin   *runtime.Binary
	built string
}

// selfBinary finds a static troupe binary for the containers: this one,
// or one built from troupe's source (runtime.SelfBinary). The source is
// looked for where this binary was built from (go build, go install and go
// run record it, unless -trimpath), then above the current folder.
func selfBinary(ctx context.Context) (*runtime.Binary, string, error) {
	selfBin.Lock()
	defer selfBin.Unlock()
	if selfBin.bin != nil {
		return selfBin.bin, selfBin.built, nil
	}
	bin, built, err := findSelfBinary(ctx)
	if err == nil {
		selfBin.bin, selfBin.built = bin, built
	}
	return bin, built, err
}

func findSelfBinary(ctx context.Context) (bin *runtime.Binary, built string, err error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	var sources []string
	if _, file, _, ok := goruntime.Caller(0); ok && filepath.IsAbs(file) {
		sources = append(sources, filepath.Dir(filepath.Dir(filepath.Dir(file)))) // <module>/cmd/troupe/run.go
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			sources = append(sources, dir)
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return runtime.SelfBinary(ctx, sources, filepath.Join(cache, "troupe", "bin"))
}

// forceOnSecondSignal watches for a second interrupt: it then removes the
// job's containers and exits. The returned function stops the watcher.
func forceOnSecondSignal(stderr io.Writer, rt runtime.Runtime, jobID string) func() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		seen := 0
		for {
			select {
			case <-stop:
				return
			case <-sigs:
				seen++
				if seen == 1 {
					fmt.Fprintln(stderr, "\nstopping: cancelling the running trials and removing their containers (Ctrl+C again to force)")
					continue
				}
				fmt.Fprintln(stderr, "forced: removing this job's containers now")
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				left, _ := rt.List(ctx, map[string]string{runtime.LabelJob: jobID})
				for _, r := range left {
					rt.Remove(ctx, r)
				}
				cancel()
				os.Exit(130)
			}
		}
	})
	return func() {
		signal.Stop(sigs)
		close(stop)
		wg.Wait()
	}
}

// progress shows a job as it runs: a live line on a terminal, NDJSON with
// --json, or one line per finished trial otherwise. It writes to standard
// error unescaped, for the live line is drawn with control sequences of its
// own, and escapes every text of the events itself (termsafe): a trial's
// error quotes what its install script, agents or verifier printed.
type progress struct {
	w        io.Writer
	json     *json.Encoder
	terminal bool
	total    int
	kept     int
	running  map[string]bool
	// outcomes is each trial's last outcome: a retried trial counts once.
	outcomes map[string]outcome.Outcome
	cost     float64
	drawn    bool
	// warned holds the warnings shown: every trial of a task gives the same.
	warned map[string]bool
}

func newProgress(a *app, asJSON bool) *progress {
	p := &progress{w: a.raw.stderr, running: map[string]bool{}, outcomes: map[string]outcome.Outcome{}, warned: map[string]bool{}}
	if asJSON {
		p.json = json.NewEncoder(a.raw.stdout)
	} else if f, ok := a.raw.stderr.(*os.File); ok {
		if info, err := f.Stat(); err == nil && info.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

func (p *progress) job(e trial.JobEvent) {
	if p.json != nil {
		p.json.Encode(e)
		return
	}
	switch e.Type {
	case trial.EventJobStarted:
		p.total, p.kept = e.Total, e.Kept
		kept := ""
		if e.Kept > 0 {
			kept = fmt.Sprintf(" (%d kept from an earlier run)", e.Kept)
		}
		p.line(fmt.Sprintf("job %s: %s%s", e.Dir, count(e.Total, "trial"), kept))
	case trial.EventRetry:
		p.line(fmt.Sprintf("retry %d of %s after an infrastructure failure: %s", e.Attempt, e.Trial, indent(e.Error)))
	}
	p.draw()
}

func (p *progress) trial(e trial.Event) {
	if p.json != nil {
		p.json.Encode(e)
		return
	}
	switch e.Type {
	case trial.EventStarted:
		p.running[e.Trial] = true
	case trial.EventWarning:
		if !p.warned[e.Message] {
			p.warned[e.Message] = true
			p.line(fmt.Sprintf("warning: %s: %s", e.Trial, e.Message))
		}
	case trial.EventFinished:
		delete(p.running, e.Trial)
		p.outcomes[e.Trial] = e.Outcome
		p.cost += e.CostUSD
		msg := fmt.Sprintf("%-14s %s (%s)", e.Outcome, e.Trial, e.Reason)
		if e.Error != "" {
			msg += ": " + indent(e.Error)
		}
		p.line(msg)
	}
	p.draw()
}

// line prints a permanent line above the live one, escaped.
func (p *progress) line(s string) {
	if p.terminal && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, termsafe.Escape(s))
	p.drawn = false
}

func (p *progress) draw() {
	if !p.terminal || p.json != nil {
		return
	}
	done, failed := p.kept, 0
	for _, o := range p.outcomes {
		if o != outcome.Cancelled {
			done++
		}
		if o != outcome.Passed {
			failed++
		}
	}
	width := 24
	filled := 0
	if p.total > 0 {
		filled = min(max(width*done/p.total, 0), width)
	}
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %d/%d done · %d running · %d not passed · $%.4f",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, p.total, len(p.running), failed, p.cost)
	p.drawn = true
}

func (p *progress) end() {
	if p.terminal && p.drawn {
		fmt.Fprintln(p.w)
	}
}

// count says "1 trial", "2 trials".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// indent keeps a message whole (its end often says what to do) and indents
// its further lines under the line it starts on.
func indent(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ")
}

// printSummary prints a table per condition.
func printSummary(out io.Writer, dir string, res *trial.JobResult) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONDITION\tTRIALS\tPASSED\tFAILED\tINFRA\tVERIFIER ERR\tCANCELLED\tPASS RATE\tCOST USD")
	for _, name := range slices.Sorted(maps.Keys(res.Conditions)) {
		c := res.Conditions[name]
		rate := "-"
		if c.PassRate != nil {
			rate = fmt.Sprintf("%.0f%% of %d", 100**c.PassRate, c.Scored)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%.4f\n", name, c.Trials, c.Passed, c.Failed, c.UnscoredInfra, c.VerifierError, c.Cancelled, rate, c.CostUSD)
	}
	tw.Flush()
	fmt.Fprintf(out, "pass rate: %s\nresults: %s (troupe compare %s gives intervals and costs)\n", outcome.Policy, dir, dir)
}
