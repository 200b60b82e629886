package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

// openLeadTrial opens a second trial on f's gateway, with a lead, writing
// its agents' call logs beside the fixture's.
func openLeadTrial(t *testing.T, f *fixture, spec TrialSpec) *Trial {
	t.Helper()
	for i := range spec.Agents {
		file, err := os.Create(filepath.Join(f.logs, spec.Agents[i].ID+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { file.Close() })
		spec.Agents[i].Log = file
	}
	spec.Prices = map[string]manifest.Price{"oa": testPrice, "mock/stuck": testPrice}
	tr, err := f.g.OpenTrial(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(context.Background()); err != nil {
			t.Errorf("close trial: %v", err)
		}
	})
	return tr
}

// chat makes one chat completions call as agent and returns its status
// and error type.
func chat(t *testing.T, g *Gateway, tr *Trial, agent string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.URL()+"/v1/chat/completions", strings.NewReader(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+tr.Token(agent).Reveal())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Type string } `json:"error"`
	}
	json.Unmarshal(data, &e)
	return resp.StatusCode, e.Error.Type
}

// TestSpentBudgetIsReportedAtOnce: a budget is reported the moment it is
// spent, with no call refused (an agent whose round limit is max_calls
// never makes the call that would be); a worker's leaves the trial open,
// the lead's and the trial's freeze it, and later calls are refused as
// trial_ended, in no file of the trial.
func TestSpentBudgetIsReportedAtOnce(t *testing.T) {
	one, two, tokens, cost := int64(1), int64(2), int64(150), 0.005
	for _, c := range []struct {
		name     string
		lead     manifest.Budget
		worker   manifest.Budget
		trialCap *float64
		calls    []string // made in order, each answered
		want     Exhaustion
		frozen   bool
	}{
		{name: "worker max_calls", worker: manifest.Budget{MaxCalls: &two}, calls: []string{"w-1", "w-1"},
			want: Exhaustion{Agent: "w-1", Budget: "max_calls", Spent: 2, Limit: 2}},
		{name: "lead max_calls", lead: manifest.Budget{MaxCalls: &one}, calls: []string{"lead-1"},
			want: Exhaustion{Agent: "lead-1", Budget: "max_calls", Spent: 1, Limit: 1}, frozen: true},
		{name: "lead max_output_tokens", lead: manifest.Budget{MaxOutputTokens: &tokens}, calls: []string{"lead-1"},
			want: Exhaustion{Agent: "lead-1", Budget: "max_output_tokens", Spent: 200, Limit: 150}, frozen: true},
		{name: "trial max_cost_usd", trialCap: &cost, calls: []string{"w-1", "lead-1"},
			want: Exhaustion{Budget: "max_cost_usd", Spent: 2 * wantCost, Limit: cost}, frozen: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			tr := openLeadTrial(t, f, TrialSpec{ID: "t2", Lead: "lead-1", MaxCostUSD: c.trialCap, Agents: []AgentSpec{
				{ID: "lead-1", Endpoint: "oa", Budget: c.lead}, {ID: "w-1", Endpoint: "oa", Budget: c.worker}}})
			for i, a := range c.calls {
				if status, typ := chat(t, f.g, tr, a); status != http.StatusOK {
					t.Fatalf("call %d of %s: %d %s", i+1, a, status, typ)
				}
			}
			select {
			case e := <-tr.Exhausted():
				if e.Agent != c.want.Agent || e.Budget != c.want.Budget || !near(e.Spent, c.want.Spent) || e.Limit != c.want.Limit {
					t.Errorf("exhaustion %+v, want %+v", e, c.want)
				}
			default:
				t.Fatal("the spent budget was not reported when it was spent")
			}
			// Another agent's call: refused as trial_ended once the trial is
			// frozen, uncounted; answered while it is not.
			other := "lead-1"
			if c.want.Agent == "lead-1" {
				other = "w-1"
			}
			linesBefore := len(f.records(t, other))
			status, typ := chat(t, f.g, tr, other)
			before := tr.Freeze("test")
			switch {
			case !c.frozen && status != http.StatusOK:
				t.Errorf("a worker's spent budget stopped %s: %d %s", other, status, typ)
			case c.frozen && c.want.Agent != "" && (status != http.StatusGone || typ != modelcall.ClassTrialEnded):
				t.Errorf("%s's call after the lead's budget: %d %s, want 410 %s", other, status, typ, modelcall.ClassTrialEnded)
			case c.frozen && c.want.Agent == "" && (status != http.StatusTooManyRequests || typ != modelcall.ClassBudgetExhausted):
				t.Errorf("%s's call after the trial's budget: %d %s, want 429 %s", other, status, typ, modelcall.ClassBudgetExhausted)
			}
			if got := before.Spent != nil; got != c.frozen || before.Cause != map[bool]string{true: modelcall.ClassBudgetExhausted, false: "test"}[c.frozen] {
				t.Errorf("the first freeze %+v (spent %+v); frozen by the budget: %v", before, before.Spent, c.frozen)
			}
			// A call after the trial's end is in no file of the trial; one a
			// spent budget refused is metered, uncounted.
			recs := f.records(t, other)
			switch ended := c.frozen && c.want.Agent != ""; {
			case ended && len(recs) != linesBefore:
				t.Errorf("%s's call after the trial's end is metered: %+v", other, recs[len(recs)-1])
			case !ended && (len(recs) != linesBefore+1 || recs[len(recs)-1].Uncounted != c.frozen):
				t.Errorf("%s's records %+v: want one more, uncounted %v", other, recs, c.frozen)
			}
			perAgent, total := tr.Usage()
			var lines int64
			for _, a := range []string{"lead-1", "w-1"} {
				counted := int64(0)
				for _, r := range f.records(t, a) {
					if !r.Uncounted {
						counted++
					}
				}
				if counted != perAgent[a].Calls {
					t.Errorf("%s: %d counted lines, %d calls in the totals", a, counted, perAgent[a].Calls)
				}
				lines += counted
			}
			if lines != total.Calls {
				t.Errorf("%d counted lines, %d calls in the trial's totals", lines, total.Calls)
			}
			spent, trialSpent := tr.Spent()
			if c.want.Agent != "" && spent[c.want.Agent].Budget != c.want.Budget || c.want.Agent == "" && trialSpent == nil {
				t.Errorf("spent %+v, trial %+v", spent, trialSpent)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

// TestFreezeSettlesCallsInFlight: a call admitted before the freeze runs
// to its end and is counted, Settle waits for it; a call after the freeze
// is refused, never forwarded, in no file of the trial; a hung call is cut at
// once, not waited for.
func TestFreezeSettlesCallsInFlight(t *testing.T) {
	f := newFixture(t)
	f.g.DrainGrace = 20 * time.Second // a settle that waits for the hang fails the timing below
	tr := openLeadTrial(t, f, TrialSpec{ID: "t2", Lead: "lead-1", Agents: []AgentSpec{
		{ID: "lead-1", Endpoint: "oa"}, {ID: "hang-1", Role: "hang", Endpoint: "mock/stuck"}}})
	release := make(chan struct{})
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"late"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":200,"prompt_tokens_details":{"cached_tokens":400}}}`)
	})
	done := make(chan int, 2)
	go func() { s, _ := chat(t, f.g, tr, "lead-1"); done <- s }()
	go func() { s, _ := chat(t, f.g, tr, "hang-1"); done <- s }()
	deadline := time.Now().Add(5 * time.Second)
	for f.up.calls.Load() < 1 || inFlight(tr) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the calls did not start")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the hang is reached
	if first := tr.Freeze(string("declared_done")); first.Cause != "declared_done" || first.Spent != nil {
		t.Errorf("first freeze %+v", first)
	}
	if status, typ := chat(t, f.g, tr, "lead-1"); status != http.StatusGone || typ != modelcall.ClassTrialEnded {
		t.Errorf("a call after the freeze: %d %s", status, typ)
	}
	settled := make(chan int)
	start := time.Now()
	go func() { settled <- tr.Settle(t.Context()) }()
	time.Sleep(200 * time.Millisecond)
	select {
	case n := <-settled:
		t.Fatalf("Settle returned (%d left) before the admitted call ended", n)
	default:
	}
	close(release)
	if n := <-settled; n != 0 {
		t.Errorf("Settle left %d calls in flight", n)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Settle took %s: it waited for the hung call", took)
	}
	<-done
	<-done
	if got := f.up.calls.Load(); got != 1 {
		t.Errorf("the upstream saw %d calls; the one after the freeze must not be forwarded", got)
	}
	// The refused call is in no file of the trial: whether an agent asks
	// it before it is swept is timing.
	recs := f.records(t, "lead-1")
	if len(recs) != 1 || recs[0].Uncounted || recs[0].CostUSD != wantCost || recs[0].ErrorClass != "" {
		t.Errorf("lead-1's records %+v", recs)
	}
	if hung := f.records(t, "hang-1"); len(hung) != 1 || hung[0].ErrorClass != modelcall.ClassDisconnect || hung[0].Uncounted {
		t.Errorf("hang-1's records %+v", hung)
	}
	perAgent, _ := tr.Usage()
	if perAgent["lead-1"].Calls != 1 || perAgent["lead-1"].CostUSD != wantCost || perAgent["hang-1"].Calls != 1 {
		t.Errorf("usage %+v", perAgent)
	}
}

func inFlight(tr *Trial) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.calls)
}

// TestDoneLetsTurnsEnd: after a FreezeAfterTurns (the DONE:), an agent
// whose last answer asked for tools makes the call that continues its
// turn, counted, and Settle waits for it; an agent at rest, or one whose
// turn has ended, is refused; a turn that does not go on within the grace
// is not waited for beyond it.
func TestDoneLetsTurnsEnd(t *testing.T) {
	f := newFixture(t)
	f.g.TurnGrace = 400 * time.Millisecond
	var askTools atomic.Bool
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		msg := `"content":"done"`
		if askTools.Load() {
			msg = `"content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"shell","arguments":"{}"}}]`
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant",`+msg+`},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`)
	})
	open := func() *Trial {
		return openLeadTrial(t, f, TrialSpec{ID: "t2", Lead: "lead-1", Agents: []AgentSpec{{ID: "lead-1", Endpoint: "oa"}, {ID: "w-1", Endpoint: "oa"}}})
	}

	tr := open()
	askTools.Store(true)
	if status, _ := chat(t, f.g, tr, "w-1"); status != http.StatusOK { // w-1 is mid-turn
		t.Fatal(status)
	}
	askTools.Store(false)
	if status, _ := chat(t, f.g, tr, "lead-1"); status != http.StatusOK { // the lead is at rest
		t.Fatal(status)
	}
	tr.FreezeAfterTurns("declared_done")
	settled := make(chan int)
	go func() { settled <- tr.Settle(t.Context()) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-settled:
		t.Fatal("Settle returned before w-1's turn ended")
	default:
	}
	if status, typ := chat(t, f.g, tr, "lead-1"); status != http.StatusGone || typ != modelcall.ClassTrialEnded {
		t.Errorf("a call that starts a turn after the DONE: %d %s", status, typ)
	}
	if status, _ := chat(t, f.g, tr, "w-1"); status != http.StatusOK {
		t.Errorf("the call that ends w-1's turn: %d", status)
	}
	select {
	case n := <-settled:
		if n != 0 {
			t.Errorf("Settle left %d calls", n)
		}
	case <-time.After(300 * time.Millisecond):
		t.Fatal("Settle did not return once the turns had ended")
	}
	if status, typ := chat(t, f.g, tr, "w-1"); status != http.StatusGone || typ != modelcall.ClassTrialEnded {
		t.Errorf("w-1's call after its turn ended: %d %s", status, typ)
	}
	if perAgent, _ := tr.Usage(); perAgent["w-1"].Calls != 2 || perAgent["lead-1"].Calls != 1 {
		t.Errorf("usage %+v", perAgent)
	}
	tr.Close(context.Background())

	// A turn that does not go on is waited for within the grace only.
	tr = open()
	askTools.Store(true)
	chat(t, f.g, tr, "w-1")
	tr.FreezeAfterTurns("declared_done")
	start := time.Now()
	tr.Settle(t.Context())
	if took := time.Since(start); took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("Settle took %s for a turn that did not go on, grace 400ms", took)
	}
	if status, typ := chat(t, f.g, tr, "w-1"); status != http.StatusGone || typ != modelcall.ClassTrialEnded {
		t.Errorf("w-1's call after the grace: %d %s", status, typ)
	}
}

// TestThaw: a multi-step trial's calls are frozen at each step's end and
// thawed for the next; a spent budget's freeze holds.
func TestThaw(t *testing.T) {
	f := newFixture(t)
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`)
	})
	calls := int64(2)
	tr := openLeadTrial(t, f, TrialSpec{ID: "t-thaw", Lead: "lead-1", Agents: []AgentSpec{{ID: "lead-1", Endpoint: "oa", Budget: manifest.Budget{MaxCalls: &calls}}}})
	tr.Freeze("declared_done")
	if status, typ := chat(t, f.g, tr, "lead-1"); status != http.StatusGone || typ != modelcall.ClassTrialEnded {
		t.Fatalf("a call after the freeze: %d %s", status, typ)
	}
	if !tr.Thaw() {
		t.Fatal("Thaw refused a freeze of the trial's own")
	}
	for i := range 2 {
		if status, _ := chat(t, f.g, tr, "lead-1"); status != http.StatusOK {
			t.Fatalf("call %d after the thaw: %d", i+1, status)
		}
	}
	// The lead's max_calls is spent: the trial froze for it, and stays so.
	if tr.Thaw() {
		t.Error("Thaw lifted the freeze of a spent budget")
	}
	if status, _ := chat(t, f.g, tr, "lead-1"); status == http.StatusOK {
		t.Error("a call after the budget was spent passed")
	}
}
