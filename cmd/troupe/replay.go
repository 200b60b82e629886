package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trialdir"
)

// exitDiverged: the replay ran and differs from its recording.
const exitDiverged = 4

type replayOptions struct {
	policy       string
	manifestPath string
	taskPath     string
	out          string
	json         bool
	timeout      float64
}

func newReplayCmd(a *app) *cobra.Command {
	var opts replayOptions
	cmd := &cobra.Command{
		Use:   "replay TRIAL_DIR",
		Short: "Run a recorded trial again with each model call answered from its recording: free, offline, and checked call by call",
		Long: `Run a recorded trial again: the same task and roster in a fresh container, with the
gateway answering each agent's n-th model call with the n-th answer of the recording
(agents/<id>/llm-conversation.jsonl.gz, kept by troupe run --record full, the default)
instead of asking the endpoint. Replayed calls cost nothing and need no network and no
key; they are metered as recorded, so budgets act as they did.

A call is replayed only while the agent asks what it asked then. The trials' ids and
their members' pubkeys, and times and durations in the text, are not differences. The
first call that asks something else is the agent's divergence: the report shows the
agent, the call and a diff of the request against the recorded one (the recording's
lines with -, the replay's with +). --on-divergence says what comes next:
  stop        answer it with an error and end the trial there, with no verdict; every
              agent's later calls are refused uncompared (default)
  live        send the agent's calls to its endpoint from there, as a run would (costs)
  mock-error  answer the agent's calls with an error and let the trial go on

Uses: a changed harness, persona or stack checked against yesterday's trials for
nothing (--manifest gives the changed roster); a flaky failure replayed until it shows.

The replay is a job folder of its own (--out, default replays/<trial>-<time>: apart
from jobs/, so that troupe compare jobs/ never pools a replay with the trials it
replays), whose trial's result.json has a "replay" section. troupe compare leaves
replays out unless --include-replays. The report compares the outcome and
the channel's messages with the recording's.

Exit status: 0 when the replay reproduced its recording (no divergence, the same
outcome and channel messages), 4 when it ran and differs, 3 when the harness failed
it (unscored_infra), 1 when it could not run or was interrupted, 2 for a usage error.`,
		Example: `  troupe replay jobs/job-1a2b3c/hello-world__hello-team-mock__1
  troupe replay jobs/tb2/fix-git__team__3 --manifest team-v2.yaml --on-divergence live
  troupe replay jobs/tb2/fix-git__team__3 --json | jq .replay.divergences`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			policy, err := modelcall.ParseDivergencePolicy(opts.policy)
			if err != nil {
				return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--on-divergence: %w", err)}
			}
			if opts.timeout <= 0 {
				return &usageError{command: cmd.CommandPath(), err: errors.New("--timeout-multiplier must be above 0")}
			}
			root, cfg, err := a.artifactRoot(cmd)
			if err != nil {
				return err
			}
			return runReplay(cmd.Context(), a, cmd, cfg, root, args[0], policy, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.policy, "on-divergence", string(modelcall.DivergeStop), "what an agent's calls get from its first call off the recording: stop (end the trial there), live (its endpoint answers), mock-error (an error answers)")
	f.StringVar(&opts.manifestPath, "manifest", "", "the roster to replay with (default: the recorded trial's manifest, at the path it was run from)")
	f.StringVar(&opts.taskPath, "task", "", "the task folder (default: the recorded trial's, at the path it was run from)")
	f.StringVarP(&opts.out, "out", "o", "", "the replay's job folder (default replays/<trial>-<time>)")
	f.BoolVar(&opts.json, "json", false, "print NDJSON events, then the replay's report as one JSON object, on standard output")
	f.Float64Var(&opts.timeout, "timeout-multiplier", 1, "scale every phase's timeout")
	artifactRootFlag(cmd)
	runtimeFlag(cmd)
	return cmd
}

func runReplay(ctx context.Context, a *app, cmd *cobra.Command, cfg *config, artifactRoot, dir string, policy modelcall.DivergencePolicy, opts replayOptions) error {
	rp, err := trial.LoadReplay(dir, policy)
	if err != nil {
		return err
	}
	rec := rp.Recorded
	for _, w := range rp.Warnings {
		fmt.Fprintf(a.stderr, "warning: %s\n", w)
	}
	manifestPath := opts.manifestPath
	if manifestPath == "" {
		manifestPath = rec.ManifestPath
	}
	cond, err := loadCondition(manifestPath, artifactRoot, cfg)
	if err != nil {
		return fmt.Errorf("the replay's roster: %w (--manifest gives another)", err)
	}
	if h := cond.Team.Manifest.Hash(); h != rec.ManifestHash {
		fmt.Fprintf(a.stderr, "note: the manifest is not the recorded one (sha256 %s, recorded %s): expect divergences where it changed\n", short(h), short(rec.ManifestHash))
	}
	taskPath := opts.taskPath
	if taskPath == "" {
		taskPath = rec.TaskPath
	}
	tk, err := task.Load(taskPath, task.Options{})
	if err != nil {
		return fmt.Errorf("the replay's task: %w (--task gives its folder)", err)
	}
	if err := job.RefuseKeysInTaskEnv([]*task.Task{tk}, cfg.endpoints); err != nil {
		return err
	}
	if tk.Digest != rec.TaskChecksum {
		fmt.Fprintf(a.stderr, "note: task %s changed since the recording (%s, recorded %s): expect divergences where its output does\n", tk.Dir, short(tk.Digest), short(rec.TaskChecksum))
	}
	out := opts.out
	if out == "" {
		out = filepath.Join("replays", rec.TrialName+"-"+time.Now().Format("20060102-150405"))
	}
	// A job folder resumes what it holds: a replay would keep the last one.
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty: a replay runs in a folder of its own (give another --out, or remove it)", out)
	}
	ropts := runOptions{multiplier: opts.timeout, readyTimeout: trial.DefaultLimits.Ready, record: trial.RecordFull}
	res, err := runJob(ctx, a, cmd, cfg, ropts, job.Spec{
		Dir: out, Conditions: []job.Condition{cond}, Tasks: []*task.Task{tk}, Attempts: 1, Concurrency: 1, Replay: rp,
		Command: append([]string{"troupe", "replay", dir}, replayArgs(opts, policy)...),
	}, opts.json)
	if res == nil {
		return err
	}
	if err != nil {
		return err
	}
	if ctx.Err() != nil || res.Unmeasured() > 0 {
		return jobExit(ctx, a, res, 0)
	}
	trialDir := filepath.Join(out, trialdir.TrialName(tk.Name, cond.Team.Manifest.Condition, 1))
	report, err := replayReport(dir, trialDir)
	if err != nil {
		return err
	}
	if opts.json {
		json.NewEncoder(a.raw.stdout).Encode(report)
	} else {
		printReplay(a.stdout, report)
	}
	if !report.Reproduced {
		return &reportedError{code: exitDiverged}
	}
	return nil
}

func replayArgs(opts replayOptions, policy modelcall.DivergencePolicy) []string {
	args := []string{"--on-divergence", string(policy)}
	if opts.manifestPath != "" {
		args = append(args, "--manifest", opts.manifestPath)
	}
	if opts.taskPath != "" {
		args = append(args, "--task", opts.taskPath)
	}
	return args
}

func short(digest string) string {
	return clip.Head(strings.TrimPrefix(digest, "sha256:"), 12)
}

// replayOutcome is troupe replay's report: the replay against its
// recording.
type replayOutcome struct {
	Type       string `json:"type"` // "replay_report"
	Recorded   string `json:"recorded_trial"`
	Replay     string `json:"replay_trial"`
	Reproduced bool   `json:"reproduced"`
	// Outcome and RecordedOutcome, with their completion reasons.
	Outcome                 string               `json:"outcome"`
	Reason                  string               `json:"completion_reason"`
	RecordedOutcome         string               `json:"recorded_outcome"`
	RecordedReason          string               `json:"recorded_completion_reason"`
	Transcript              trial.TranscriptDiff `json:"transcript"`
	*modelcall.ReplayReport `json:"replay"`
}

// replayReport compares a replay's trial with its recording.
func replayReport(recordedDir, trialDir string) (*replayOutcome, error) {
	rec, err := trialdir.ReadResult(filepath.Join(recordedDir, trialdir.Result))
	if err != nil {
		return nil, err
	}
	res, err := trialdir.ReadResult(filepath.Join(trialDir, trialdir.Result))
	if err != nil {
		return nil, err
	}
	if res.Replay == nil {
		return nil, fmt.Errorf("%s has no replay section: it is not a replay's trial", trialDir)
	}
	td, err := trial.CompareTranscripts(recordedDir, trialDir)
	if err != nil {
		return nil, err
	}
	r := &replayOutcome{Type: "replay_report", Recorded: recordedDir, Replay: trialDir,
		Outcome: string(res.Outcome), Reason: string(res.CompletionReason), RecordedOutcome: string(rec.Outcome), RecordedReason: string(rec.CompletionReason),
		Transcript: td, ReplayReport: res.Replay.ReplayReport}
	r.Reproduced = res.Replay.Reproduced() && res.Outcome == rec.Outcome && td.At == 0
	return r, nil
}

// printReplay writes the report for a person: the outcomes, each agent's
// calls, the channel, and the first divergence with its diff.
func printReplay(w io.Writer, r *replayOutcome) {
	fmt.Fprintf(w, "replay of %s\n  recorded: %s (%s)\n  replay:   %s (%s), in %s\n", r.Recorded, r.RecordedOutcome, r.RecordedReason, r.Outcome, r.Reason, r.Replay)
	fmt.Fprintln(w, "calls:")
	var live modelcall.USD
	for _, ag := range r.Agents {
		line := fmt.Sprintf("  %-12s %d of %d recorded calls replayed", ag.ID, ag.Replayed, ag.Recorded)
		if ag.Live > 0 {
			line += fmt.Sprintf(", %d live ($%.4f)", ag.Live, ag.LiveCostUSD)
		}
		if ag.Refused > 0 {
			line += fmt.Sprintf(", %d refused with an error", ag.Refused)
		}
		if ag.NotInRoster {
			line += " (not in the replay's roster)"
		}
		live += ag.LiveCostUSD
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "  replayed calls cost nothing; live calls cost $%.4f\n", live)
	switch td := r.Transcript; {
	case td.At == 0:
		fmt.Fprintf(w, "channel: the same %d messages as recorded (ids and times aside)\n", td.Recorded)
	default:
		fmt.Fprintf(w, "channel: message %d differs (%d recorded, %d replayed)\n  recorded: %s\n  replay:   %s\n", td.At, td.Recorded, td.Replayed, describe(td.Was), describe(td.Is))
	}
	if len(r.Divergences) == 0 {
		fmt.Fprintln(w, "divergences: none")
	} else {
		d := r.Divergences[0]
		fmt.Fprintf(w, "divergences: %d; the first: agent %s, call %d: %s\n", len(r.Divergences), d.Agent, d.Call, d.Why)
		for line := range strings.Lines(d.Diff) {
			fmt.Fprint(w, "    "+line)
		}
		for _, d := range r.Divergences[1:] {
			fmt.Fprintf(w, "  then agent %s, call %d: %s\n", d.Agent, d.Call, d.Why)
		}
	}
	if r.Reproduced {
		fmt.Fprintln(w, "reproduced: the replay played its recording")
	} else {
		fmt.Fprintln(w, "not reproduced: the replay differs from its recording")
	}
}

func describe(m *trial.Message) string {
	if m == nil {
		return "(none: the channel ended before it)"
	}
	return fmt.Sprintf("%s → %s: %q", m.From, strings.Join(m.Mentions, ", "), clip.Head(m.Content, 200))
}
