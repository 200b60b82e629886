package main

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trialdir"
)

func newScenarioCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "Mock scenarios: scripted models for offline trials",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newScenarioFromTrialCmd(a))
	return cmd
}

func newScenarioFromTrialCmd(a *app) *cobra.Command {
	var lim recordLimitFlags
	cmd := &cobra.Command{
		Use:   "from-trial TRIAL_DIR",
		Short: "Write a mock scenario that plays a recorded trial's model answers back, agent by agent",
		Long: `Read a trial's recorded model calls (agents/<id>/llm-conversation.jsonl.gz, kept by troupe
run --record full, the default) and write, on standard output, a mock scenario
(docs/mock-scenarios.md) whose script for each agent id answers its calls in order with
what the recording answered: the text, the tool calls, the usage. Steps match only the role
of the request's last message, so harmless prompt changes do not break them; a recorded
failure becomes an error step. The recorded trial's own values in the answers (its id, its
members' pubkeys as hex or npub) are written as templates ({{.Trial}},
{{(.Agent "worker-1").Pubkey}}, {{.User.Npub}}), so that a run of the scenario names its own
trial and members, as troupe replay translates them.

To run the team against it offline, configure the manifest's endpoint names as mock
endpoints playing the file, in troupe's config:

  endpoints:
    gpt-5.6-terra: {api: mock, scenario: scenarios/from-yesterday.yaml}

A real run becomes an offline regression test.`,
		Example: "  troupe scenario from-trial jobs/tb2/fix-git__team__1 > scenarios/fix-git.yaml",
		Args:    minArgs(1, "a trial folder"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return scenarioFromTrial(a.raw.stdout, a.stderr, args[0], lim.limits()) // YAML, to be saved
		},
	}
	lim.register(cmd)
	return cmd
}

// recordLimitFlags set what reading a conversation record back may expand
// to (modelcall.RecordLimits): a tampered record can name one large block
// thousands of times.
type recordLimitFlags struct{ recordMiB, callMiB int64 }

func (f *recordLimitFlags) register(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&f.recordMiB, "max-expanded-mib", modelcall.DefaultRecordLimits.Record>>20, "MiB a conversation record's requests may make, whole again, together: a record over it is refused")
	cmd.Flags().Int64Var(&f.callMiB, "max-call-mib", modelcall.DefaultRecordLimits.Call>>20, "MiB one recorded call's request may make, whole again")
}

func (f recordLimitFlags) limits() modelcall.RecordLimits {
	return modelcall.RecordLimits{Record: f.recordMiB << 20, Call: f.callMiB << 20}
}

func scenarioFromTrial(out, errOut io.Writer, dir string, lim modelcall.RecordLimits) error {
	files, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(trialdir.Conversation("*"))))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s holds no recorded model calls (agents/<id>/llm-conversation.jsonl.gz): is it a trial folder of a run with --record full, the default?", dir)
	}
	byAgent := map[string][]modelcall.Call{}
	var errs []error
	for _, f := range files {
		agent := filepath.Base(filepath.Dir(f))
		calls, missing, err := readRecord(f, lim)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		if missing > 0 {
			fmt.Fprintf(errOut, "warning: %s: %d parts of requests were dropped by the record's bound; the answers are whole\n", f, missing)
		}
		if len(calls) > 0 {
			byAgent[agent] = calls
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	trialID, members, err := trial.ReadOwn(dir)
	if err != nil {
		return fmt.Errorf("the trial's own ids (its id and its members' pubkeys, which the scenario names rather than copies): %w", err)
	}
	return llm.WriteScenario(out, "the recorded answers of trial "+filepath.Base(filepath.Clean(dir)), byAgent, trial.Translate(trialID, members, ownTemplate))
}

// ownTemplate is how a scenario names a recorded trial's own value: a
// template of the facts of the trial that plays it (docs/mock-scenarios.md).
func ownTemplate(v trial.Own) string {
	who := "(.Agent " + strconv.Quote(v.Member) + ")"
	if v.Member == "user" {
		who = ".User"
	}
	switch v.Kind {
	case trial.OwnTrialID:
		return "{{.Trial}}"
	case trial.OwnNpub:
		return "{{" + who + ".Npub}}"
	}
	return "{{" + who + ".Pubkey}}"
}

// readRecord reads an agent's conversation record a call at a time,
// keeping of each request only its last message, which is all a
// scenario's step matches: the record's requests are never held whole.
func readRecord(path string, lim modelcall.RecordLimits) ([]modelcall.Call, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, 0, err
	}
	rr := modelcall.NewRecordReader(zr, lim)
	var calls []modelcall.Call
	err = rr.Each(func(c modelcall.Call) {
		c.Request = modelcall.LastOnly(c.Request)
		calls = append(calls, c)
	})
	if err != nil {
		return nil, rr.Missing(), err
	}
	return calls, rr.Missing(), nil
}
