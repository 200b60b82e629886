package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/examples"
	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/relay"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trial/outcome"
)

// jobExit is the exit status of a job that ran: 1 when it was
// interrupted, 3 when some trials could not be measured.
func jobExit(ctx context.Context, a *app, res *job.Result, retries int) error {
	if ctx.Err() != nil {
		fmt.Fprintf(a.stderr, "interrupted: %d of %d trials are done; run the same command to finish the job\n", res.Done(), res.Total)
		return &reportedError{code: exitFailed}
	}
	if n := res.Unmeasured(); n > 0 {
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
func runJob(ctx context.Context, a *app, cmd *cobra.Command, cfg *config, opts runOptions, spec job.Spec, asJSON bool) (res *job.Result, err error) {
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
	// A replay that never goes live asks no upstream: it needs no key.
	gw, err := openGateway(ctx, cfg, spec.Replay != nil && spec.Replay.OnDivergence != modelcall.DivergeLive)
	if err != nil {
		if cerr := rl.Close(context.WithoutCancel(ctx)); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close the relay: %w", cerr))
		}
		return nil, err
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
	env := &trial.Env{Runtime: rt, Relay: rl, Gateway: gw, Binary: bin, JobID: jobID, Version: shortVersion(), Limits: limits, Network: opts.network, Record: opts.record, HostPaths: opts.hostPaths, Services: opts.services}

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
	res, err = job.Run(ctx, env, spec, job.Progress{Trial: show.trial, Job: show.job})
	show.end()
	return res, err
}

// openGateway opens the metering gateway with the config file's
// endpoints and the mock scenarios, the built-in ones and those beside
// the config file. keysOptional opens it without the endpoints' keys.
func openGateway(ctx context.Context, cfg *config, keysOptional bool) (*llm.Gateway, error) {
	gw := llm.New(cfg.endpoints)
	gw.KeysOptional = keysOptional
	gw.Scenarios = examples.Scenarios()
	if cfg.path != "" {
		gw.ScenarioDir = filepath.Dir(cfg.path)
	}
	if err := gw.Open(ctx); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return gw, nil
}

// forceOnSecondSignal watches for a second interrupt: it then removes the
// job's containers and exits. The returned function stops the watcher.
func forceOnSecondSignal(stderr io.Writer, rt runtime.Cleaner, jobID string) func() {
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

// printSummary prints a table per condition.
func printSummary(out io.Writer, dir string, res *job.Result) {
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
