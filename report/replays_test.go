package report

import (
	"testing"

	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// TestReplayWithoutReport: a result whose replay section has no report
// (only its source) is still a replay: left out, or counted at no live
// cost, and shown with an empty report, never a crash on the missing
// report.
func TestReplayWithoutReport(t *testing.T) {
	report := &modelcall.ReplayReport{Agents: []modelcall.ReplayAgent{{ID: "lead-1", LiveCostUSD: 0.25}}}
	for _, tc := range []struct {
		name     string
		replay   *trialdir.ReplayRecord
		liveCost modelcall.USD
	}{
		{"a replay with its report", &trialdir.ReplayRecord{Source: "jobs/j/t__c__1", ReplayReport: report}, 0.25},
		{"a replay without one", &trialdir.ReplayRecord{Source: "jobs/j/t__c__1"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := mk("c", "aa", "t", 1, outcome.Passed, 1)
			tr.AgentResult.CostUSD = 3
			tr.Agents = []trialdir.AgentRecord{{ID: "lead-1", Usage: modelcall.Totals{CostUSD: 3}}}
			tr.Replay = tc.replay
			if kept, _ := Replays([]*Trial{tr}, false); len(kept) != 0 {
				t.Errorf("a replay kept without --include-replays: %v", kept)
			}
			kept, _ := Replays([]*Trial{tr}, true)
			if len(kept) != 1 || kept[0].AgentResult.CostUSD != tc.liveCost || kept[0].Agents[0].Usage.CostUSD != tc.liveCost {
				t.Errorf("counted at %+v, want its live cost %g", kept, tc.liveCost)
			}
			if tr.AgentResult.CostUSD != 3 || tr.Agents[0].Usage.CostUSD != 3 {
				t.Errorf("the trial itself was changed: %+v", tr.TrialResult)
			}
			shown := replayShown(tr.Replay)
			if shown == nil || shown.ReplayReport == nil || shown.Source != tc.replay.Source {
				t.Errorf("shown as %+v", shown)
			}
			if tc.replay.ReplayReport != nil && shown.ReplayReport != report {
				t.Errorf("its report was not shown as it is")
			}
		})
	}
	if replayShown(nil) != nil {
		t.Error("a trial that is no replay shown as one")
	}
}
