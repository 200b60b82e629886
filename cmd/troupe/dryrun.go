package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/kubernetes"
)

// dryRun is troupe run's pre-flight alone, and the plan it checked: the
// job planned and every endpoint checked on a gateway that is opened and
// closed, and asked for its models with its key, what an earlier run left in the job folder read, each build's
// name on a cluster worked out; no container, nothing written. The plan
// is printed as a listing, or as JSON.
func dryRun(ctx context.Context, a *app, cmd *cobra.Command, cfg *config, spec job.Spec, asJSON bool) (err error) {
	gw, err := openGateway(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := gw.Close(context.WithoutCancel(ctx)); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close the gateway: %w", cerr))
		}
	}()
	plan, err := job.NewPlan(spec)
	if err != nil {
		return err
	}
	if err := plan.CheckEndpoints(ctx, gw); err != nil {
		return err
	}
	if err := plan.ProbeEndpoints(ctx, gw); err != nil {
		return fmt.Errorf("pre-flight: %w", err)
	}
	plan.Resume()
	v, err := a.settings(cmd, "image_repo")
	if err != nil {
		return err
	}
	repo := v.GetString("image_repo")
	plan.NameImages(func(b runtime.BuildSpec) (string, error) { return kubernetes.EnvironmentRef(repo, b) })
	if asJSON {
		enc := json.NewEncoder(a.raw.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(plan)
	}
	printJobPlan(a.stdout, plan)
	fmt.Fprintf(a.stdout, "pre-flight passed: %d trials (%d conditions × %d tasks × %d attempts); nothing was started\n", len(plan.Trials), len(spec.Conditions), len(spec.Tasks), plan.Attempts)
	return nil
}

// printJobPlan prints a job's plan as a listing: the job, its conditions
// with each agent's stack, its tasks, stacks and images, then every trial
// in the order it runs and what the run does with it.
func printJobPlan(out io.Writer, p *job.Plan) {
	states := map[job.State]int{}
	for _, t := range p.Trials {
		states[t.State]++
	}
	fmt.Fprintf(out, "job %s: %s, at most %d at once; %d to run, %d kept from an earlier run, %d to redo; %d retries of an infrastructure failure\n",
		p.Dir, count(len(p.Trials), "trial"), p.Concurrency, states[job.ToRun], states[job.Kept], states[job.Redo], p.Retries)
	if s := p.Sequential; s != nil {
		fmt.Fprintf(out, "sequential: against %s, at most %d rounds (α %.2f, ±%.2f); a round runs only the baseline and the conditions not yet decided\n",
			s.Baseline, p.Attempts, s.Params.Alpha, s.Params.Delta)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "conditions:")
	for _, c := range p.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, c.Manifest, c.ManifestHash)
		if c.Oracle {
			fmt.Fprintf(tw, "    oracle\teach task's solution/solve.sh\n")
		}
		for _, a := range c.Agents {
			fmt.Fprintf(tw, "    %s\tstack %s\n", a.Agent, a.Stack)
		}
	}
	fmt.Fprintln(tw, "tasks:")
	for _, t := range p.Tasks {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.Name, t.Path, t.Digest)
		for _, h := range t.HostPaths {
			fmt.Fprintf(tw, "    host path\t%s\t%s\n", h.Service, hostPathLine(h))
		}
	}
	fmt.Fprintln(tw, "stacks:")
	for _, s := range p.Stacks {
		fmt.Fprintf(tw, "  %s\t%s\t%s\tused by %s\n", s.Name, s.Source, s.Digest, strings.Join(s.Conditions, ", "))
		for _, n := range s.Unchecked {
			fmt.Fprintf(tw, "    note: %s\n", n)
		}
	}
	fmt.Fprintln(tw, "images:")
	for _, img := range p.Images {
		fmt.Fprintf(tw, "  %s\t%s\n", img.Name(), imageSource(img))
	}
	tw.Flush()
	printPlanTrials(out, p)
}

// imageSource says where an image of a plan comes from: pulled, built (and
// named so on a cluster), the name tried before the build, or why it
// cannot be had.
func imageSource(img job.Image) string {
	var how []string
	if img.Pull != "" {
		how = append(how, "pull "+img.Pull)
	}
	if img.Context != "" {
		build := "build " + img.Context
		if img.Dockerfile != "" {
			build += " (" + img.Dockerfile + ")"
		}
		if img.Ref != "" {
			build += ", on a cluster " + img.Ref
		}
		how = append(how, build)
	}
	s := strings.Join(how, "; else ")
	if img.Error != "" {
		s = strings.TrimPrefix(s+"; error: "+img.Error, "; ")
	}
	return s
}

// printPlanTrials lists a plan's trials in the order they run, each with
// what the run does with it.
func printPlanTrials(out io.Writer, p *job.Plan) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "trials (attempts outermost, conditions innermost):")
	for _, t := range p.Trials {
		what := string(t.State)
		switch t.State {
		case job.Kept:
			what += ": " + string(t.Outcome)
		case job.Redo:
			what += ": " + t.Why
		}
		fmt.Fprintf(tw, "  %s\t%s\n", t.Name, what)
	}
	tw.Flush()
}

// hostPathLine says how a task's bind of a host path is mounted.
func hostPathLine(h job.PlanHostPath) string {
	s := h.Source
	if h.Host != h.Source {
		s += " (" + h.Host + ")"
	}
	mode := "read-only"
	if h.Write {
		mode = "read-write"
	}
	return s + " at " + h.Target + ", " + mode
}
