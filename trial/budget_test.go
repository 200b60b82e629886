package trial

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trialdir"
)

// usageOnDisk is what a trial's files say an agent used: the metering
// lines the gateway counted, their cost, and the conversation record's
// calls.
type usageOnDisk struct {
	Counted, Uncounted, Recorded int
	CostUSD                      float64
}

func readUsage(t *testing.T, dir, agent string) usageOnDisk {
	t.Helper()
	var u usageOnDisk
	agentDir := filepath.Join(dir, "agents", agent)
	f, err := os.Open(filepath.Join(agentDir, "llm-calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var r modelcall.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", agent, err)
		}
		if r.Uncounted {
			u.Uncounted++
			if r.CostUSD != 0 || r.InputTokens != 0 || r.OutputTokens != 0 {
				t.Errorf("%s: an uncounted call has usage: %+v", agent, r)
			}
			continue
		}
		u.Counted++
		u.CostUSD += r.CostUSD
	}
	calls, missing, err := modelcall.ReadConversation(bytes.NewReader(readPlain(t, filepath.Join(agentDir, "llm-conversation.jsonl.gz"))))
	if err != nil || missing != 0 {
		t.Fatalf("%s: conversation record: %v, %d blocks missing", agent, err, missing)
	}
	u.Recorded = len(calls)
	return u
}

// checkAgrees fails unless result.json, llm-calls.jsonl and the
// conversation record agree on each agent's calls and cost (result.json's
// to the micro-dollar it writes).
func checkAgrees(t *testing.T, res *trialdir.TrialResult, dir string) map[string]usageOnDisk {
	t.Helper()
	out := map[string]usageOnDisk{}
	var calls int64
	var cost float64
	for _, a := range res.Agents {
		u := readUsage(t, dir, a.ID)
		out[a.ID] = u
		if int64(u.Counted) != a.Usage.Calls || int64(u.Recorded) != a.Usage.Calls || !sameUSD(u.CostUSD, float64(a.Usage.CostUSD), 0) {
			t.Errorf("%s: result %d calls $%.6f; llm-calls.jsonl %d counted (%d uncounted) $%.6f; conversation record %d calls",
				a.ID, a.Usage.Calls, a.Usage.CostUSD, u.Counted, u.Uncounted, u.CostUSD, u.Recorded)
		}
		calls += a.Usage.Calls
		cost += float64(a.Usage.CostUSD)
	}
	if calls != res.AgentResult.NCalls || !sameUSD(cost, float64(res.AgentResult.CostUSD), len(res.Agents)) {
		t.Errorf("agents' totals %d calls $%.6f, the trial's %d $%.6f", calls, cost, res.AgentResult.NCalls, res.AgentResult.CostUSD)
	}
	return out
}

// sameUSD says whether two amounts agree as result.json writes them, each
// rounded to the micro-dollar on its own: b is written rounded, and a sums
// n figures written rounded (0: a is exact), each half a micro-dollar off
// at most.
func sameUSD(a, b float64, n int) bool { return math.Abs(a-b) <= 5e-7*float64(n+1)+1e-12 }

// TestLeadMaxCallsEndsTheTrial: an orchestrator whose max_calls is spent
// ends the trial budget_exhausted when its last call settles, long before
// the deadline, though the reference agent (whose round limit max_calls
// is) never makes the call the gateway would refuse.
func TestLeadMaxCallsEndsTheTrial(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/lead-calls.yaml", helloWorld)
	if res.CompletionReason != BudgetExhausted {
		t.Fatalf("completion reason %s, want %s: %+v", res.CompletionReason, BudgetExhausted, res.ExceptionInfo)
	}
	if took := res.AgentExecution.FinishedAt.Sub(*res.AgentExecution.StartedAt); took > 15*time.Second {
		t.Errorf("the trial's work took %s: the spent budget did not end it at once (deadline 40 s)", took.Round(time.Millisecond))
	}
	a := res.Agents[0]
	if a.BudgetExhausted != "max_calls" || a.Usage.Calls != 3 || res.TrialBudgetExhausted {
		t.Errorf("agent record %+v, trial budget exhausted %v", a, res.TrialBudgetExhausted)
	}
	checkAgrees(t, res, dir)
}

// TestWorkerMaxCallsIsRecorded: a worker whose max_calls is spent is
// recorded as spent, and the trial goes on to the orchestrator's DONE:.
// Run three times, every figure is the same, and every line: the lead's
// call after its DONE: ends the turn the DONE: was in, and is the trial's
// every time.
func TestWorkerMaxCallsIsRecorded(t *testing.T) {
	env := testEnv(t)
	var first map[string]usageOnDisk
	var firstRes *trialdir.TrialResult
	for run := range 3 {
		res, dir := runTrial(t, env, "testdata/manifests/worker-calls.yaml", helloWorld)
		if res.CompletionReason != DeclaredDone {
			t.Fatalf("run %d: completion reason %s, want %s: %+v", run, res.CompletionReason, DeclaredDone, res.ExceptionInfo)
		}
		lead, worker := res.Agents[0], res.Agents[1]
		// The lead's call after its DONE: ends its turn: the trial's.
		if worker.BudgetExhausted != "max_calls" || worker.Usage.Calls != 2 || lead.BudgetExhausted != "" || lead.Usage.Calls != 4 {
			t.Errorf("run %d: lead %+v, worker %+v", run, lead, worker)
		}
		got := checkAgrees(t, res, dir)
		if got[lead.ID].Uncounted != 0 || got[worker.ID].Uncounted != 0 {
			t.Errorf("run %d: uncounted lines: lead %d (its call after its DONE:?), worker %d", run, got[lead.ID].Uncounted, got[worker.ID].Uncounted)
		}
		if first == nil {
			first, firstRes = got, res
			continue
		}
		for id, u := range got {
			if u != first[id] {
				t.Errorf("run %d: %s used %+v, run 0 %+v", run, id, u, first[id])
			}
		}
		if res.AgentResult != firstRes.AgentResult {
			t.Errorf("run %d: totals %+v, run 0 %+v", run, res.AgentResult, firstRes.AgentResult)
		}
	}
}
