package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial"
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
	services     trial.ServicesPolicy
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
	// hostPaths are the host paths tasks may bind (--allow-host-path).
	hostPaths trial.HostPaths
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
			root, cfg, err := opts.resolve(a, cmd, args)
			if err != nil {
				return err
			}
			return runRun(cmd.Context(), a, cmd, opts, root, cfg, os.Args)
		},
	}
	runFlags(cmd, &opts)
	return cmd
}

// runFlags adds troupe run's flags to cmd, read into opts.
func runFlags(cmd *cobra.Command, opts *runOptions) {
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
	f.String("services", string(trial.ServicesAuto), `what becomes of the processes the agents leave running: "sweep" ends them all before the verifier; "keep" (Harbor's way) ends the agents' own and lets those they detached (a server they were asked to start) run on into the verifier, listed in result.json, whose verdict then says agent code ran during it; "auto" keeps them for the tasks that declare it ([metadata.troupe] services = "keep") and sweeps for the others`)
	runtimeFlag(cmd)
	hostPathFlag(cmd)
	f.BoolVar(&opts.dryRun, "dry-run", false, "check everything the run would check before its first container (manifests, stacks and their digests, tasks, endpoints), start nothing, and print the plan: every trial, stack and image, and what an earlier run in --out left (with --json, as JSON)")
	f.BoolVar(&opts.untilDecided, "until-decided", false, "run in rounds (every task once more per round) and stop scheduling a condition once an anytime-valid test against --baseline says better, worse or within ±--delta (docs/compare.md)")
	f.StringVar(&opts.baseline, "baseline", "", "with --until-decided: the condition the others are tested against (default: the first manifest's)")
	f.Float64Var(&opts.delta, "delta", 0, "with --until-decided: the difference in pass rate that matters, in (0, 1): within ±delta is equivalent, and the test is sized to detect it")
	f.Float64Var(&opts.alpha, "alpha", 0.05, "with --until-decided: the chance of any wrong decision, over all rounds")
	f.Float64Var(&opts.power, "power", 0.8, "with --until-decided: the power the fixed design it is measured against has at --delta; 1 − power is the level of its futility stop")
	f.StringVar(&opts.pilot, "pilot", "", "with --until-decided: a job folder whose paired results (the same baseline) size the test's first bets and the fixed design; default: the most a pair's variance can be")
	f.IntVar(&opts.maxAttempts, "max-attempts", 0, "with --until-decided: at most this many rounds (attempts per task); default twice the fixed design's")
	f.StringVar(&opts.recordFlag, "record", string(trial.RecordFull), "what each trial keeps of its model calls: full (every call whole, request and answer, in agents/<id>/llm-conversation.jsonl.gz), meta (metering lines only), none")
	artifactRootFlag(cmd)
}

// resolve reads the command line into opts, with the settings it takes
// from the environment and the config file, and refuses what cannot run.
func (opts *runOptions) resolve(a *app, cmd *cobra.Command, args []string) (artifactRoot string, cfg *config, err error) {
	opts.manifests = args
	if len(opts.tasks) == 0 && len(opts.datasets) == 0 {
		return "", nil, &usageError{command: cmd.CommandPath(), err: errors.New("give tasks: --tasks PATH (a task folder with task.toml, instruction.md, environment/, tests/, or a folder of tasks), or --dataset NAME@VERSION (a registry's dataset: troupe datasets list)")}
	}
	if opts.attempts < 1 || opts.concurrency < 1 || opts.retries < 0 || opts.multiplier <= 0 {
		return "", nil, &usageError{command: cmd.CommandPath(), err: errors.New("--attempts and --concurrency must be at least 1, --retries at least 0, --timeout-multiplier above 0")}
	}
	root, cfg, err := a.artifactRoot(cmd)
	if err != nil {
		return "", nil, err
	}
	if opts.network, err = a.networkPolicy(cmd); err != nil {
		return "", nil, err
	}
	if opts.services, err = a.servicesPolicy(cmd); err != nil {
		return "", nil, err
	}
	if opts.registry, err = a.registry(cmd); err != nil {
		return "", nil, err
	}
	if opts.hostPaths, err = a.hostPaths(cmd); err != nil {
		return "", nil, err
	}
	f := cmd.Flags()
	if opts.untilDecided && f.Changed("attempts") {
		return "", nil, &usageError{command: cmd.CommandPath(), err: errors.New("--until-decided runs as many rounds (attempts) as it needs: bound them with --max-attempts, not --attempts")}
	}
	for _, name := range []string{"baseline", "delta", "alpha", "power", "max-attempts", "pilot"} {
		if f.Changed(name) && !opts.untilDecided {
			return "", nil, &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--%s is a setting of --until-decided", name)}
		}
	}
	if opts.record, err = trial.ParseRecordMode(opts.recordFlag); err != nil {
		return "", nil, &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--record: %w", err)}
	}
	return root, cfg, nil
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

// servicesPolicy resolves --services with troupe's precedence (the flag,
// TROUPE_SERVICES, the config file's services).
func (a *app) servicesPolicy(cmd *cobra.Command) (trial.ServicesPolicy, error) {
	v, err := a.settings(cmd, "services")
	if err != nil {
		return "", err
	}
	p, err := trial.ParseServicesPolicy(v.GetString("services"))
	if err != nil {
		return "", &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--services (or TROUPE_SERVICES, or services: in the config file): %w", err)}
	}
	return p, nil
}

// loadCondition loads and checks a manifest as a job runs it
// (checkManifest).
func loadCondition(path, artifactRoot string, cfg *config) (job.Condition, error) {
	_, c, err := checkManifest(path, artifactRoot, cfg, false)
	if err != nil {
		return job.Condition{}, fmt.Errorf("%s is not valid (troupe validate %s):\n%w", path, path, err)
	}
	return c, nil
}

func runRun(ctx context.Context, a *app, cmd *cobra.Command, opts runOptions, artifactRoot string, cfg *config, argv []string) (err error) {
	// Everything that can be checked is checked before any container starts.
	conds, tasks, err := loadJobInputs(ctx, a, &opts, artifactRoot, cfg)
	if err != nil {
		return err
	}
	spec := job.Spec{
		Dir: opts.out, Conditions: conds, Tasks: tasks, Attempts: opts.attempts, Concurrency: opts.concurrency,
		Retries: opts.retries, Command: argv, HostPaths: opts.hostPaths,
	}
	if spec.Dir == "" {
		inputs := opts.manifests
		if opts.oracle {
			inputs = append(slices.Clone(inputs), trial.OracleManifestPath)
		}
		spec.Dir = job.DefaultDir(inputs, opts.tasks)
	}
	if opts.untilDecided {
		if spec.Sequential, spec.Attempts, err = sequential(a.stderr, conds, len(tasks), opts); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "deciding against %s: at most %d rounds (the fixed design at power %.2f: %d)\n", spec.Sequential.Baseline, spec.Attempts, opts.power, spec.Sequential.Params.FixedRounds)
	}
	if opts.dryRun {
		return dryRun(ctx, a, cmd, cfg, spec, opts.json)
	}
	// tasks check --json prints its own report on standard output.
	res, err := runJob(ctx, a, cmd, cfg, opts, spec, opts.json && !opts.check)
	if res == nil {
		return err
	}
	if opts.check {
		return cmp.Or(err, printCheck(a, spec.Dir, res, opts.json))
	}
	if !opts.json {
		printSummary(a.stdout, spec.Dir, res)
		if res.Sequential != nil {
			printDecisions(a.stdout, res.Sequential)
		}
	}
	if err != nil { // the job ran, and closing the relay or gateway failed
		return err
	}
	return jobExit(ctx, a, res, opts.retries)
}

// loadJobInputs loads and checks the job's conditions (its manifests and
// the oracle) and tasks (--tasks, and --dataset's, fetched into the cache
// and added to opts.tasks): every problem, joined. The tasks' warnings go
// to standard error.
func loadJobInputs(ctx context.Context, a *app, opts *runOptions, artifactRoot string, cfg *config) ([]job.Condition, []*task.Task, error) {
	var conds []job.Condition
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
		conds = append(conds, job.OracleCondition())
	}
	// --dataset's tasks are folders in the cache, read as --tasks reads its own.
	limits, err := opts.datasetLimits.limits()
	if err != nil {
		return nil, nil, errors.Join(append(errs, err)...)
	}
	fetched, origins, err := datasetTasks(ctx, a.stderr, a.progress(), opts.datasets, opts.registry, limits)
	if err != nil {
		return nil, nil, errors.Join(append(errs, err)...)
	}
	opts.tasks = append(opts.tasks, fetched...)
	tasks, terr := task.Find(opts.tasks, task.Options{Strict: opts.strict})
	for _, t := range tasks {
		t.Origin = origins[filepath.Clean(t.Dir)]
	}
	errs = append(errs, terr, job.RefuseKeysInTaskEnv(tasks, cfg.endpoints), opts.hostPaths.Check(tasks))
	if opts.oracle {
		for _, t := range tasks {
			switch {
			case t.Solved():
			case len(t.Steps) > 0:
				errs = append(errs, fmt.Errorf("task %s has no solution for each step (steps/<name>/solution/solve.sh, else solution/solve.sh): the oracle has nothing to run there", t.Dir))
			default:
				errs = append(errs, fmt.Errorf("task %s has no solution/solve.sh: the oracle has nothing to run there", t.Dir))
			}
		}
	}
	for _, t := range tasks {
		for _, w := range t.Warnings {
			fmt.Fprintf(a.stderr, "warning: %s\n", w)
		}
	}
	return conds, tasks, errors.Join(errs...)
}
