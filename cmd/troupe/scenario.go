package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/llm"
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
	return &cobra.Command{
		Use:   "from-trial TRIAL_DIR",
		Short: "Write a mock scenario that plays a recorded trial's model answers back, agent by agent",
		Long: `Read a trial's recorded model calls (agents/<id>/llm-conversation.jsonl.gz, kept by troupe
run --record full, the default) and write, on standard output, a mock scenario
(docs/mock-scenarios.md) whose script for each agent id answers its calls in order with
what the recording answered: the text, the tool calls, the usage. Steps match only the role
of the request's last message, so harmless prompt changes do not break them; a recorded
failure becomes an error step.

To run the team against it offline, configure the manifest's endpoint names as mock
endpoints playing the file, in troupe's config:

  endpoints:
    gpt-5.6-terra: {api: mock, scenario: scenarios/from-yesterday.yaml}

A real run becomes an offline regression test.`,
		Example: "  troupe scenario from-trial jobs/tb2/fix-git__team__1 > scenarios/fix-git.yaml",
		Args:    minArgs(1, "a trial folder"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return scenarioFromTrial(a.raw.stdout, a.stderr, args[0]) // YAML, to be saved
		},
	}
}

func scenarioFromTrial(out, errOut io.Writer, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "agents", "*", "llm-conversation.jsonl.gz"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s holds no recorded model calls (agents/<id>/llm-conversation.jsonl.gz): is it a trial folder of a run with --record full, the default?", dir)
	}
	byAgent := map[string][]llm.Call{}
	var errs []error
	for _, f := range files {
		agent := filepath.Base(filepath.Dir(f))
		calls, missing, err := readRecord(f)
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
	return llm.WriteScenario(out, "the recorded answers of trial "+filepath.Base(filepath.Clean(dir)), byAgent)
}

// readRecord reads an agent's conversation record.
func readRecord(path string) ([]llm.Call, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return llm.ReadCompressedConversation(f)
}
