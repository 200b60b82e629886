package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupebench/troupe/manifest"
)

// The hello-team scenario: the lead delegates by role, the worker writes the
// file and reports to the lead by id, the lead checks it and ends the trial.
func TestHelloTeamReachesDone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{scenario: "team"}, lead, worker)
	task := h.post("Create hello.txt in the working folder containing Hello, world!", "lead-1")
	done := h.waitDone(30 * time.Second)

	if done.PubKey != h.agents["lead-1"].pk {
		t.Fatalf("DONE: came from %s, want the lead", done.PubKey)
	}
	if !strings.Contains(done.Content, "worker-1 wrote it") {
		t.Errorf("DONE: content %q", done.Content)
	}
	data, err := os.ReadFile(filepath.Join(h.workdir, "hello.txt"))
	if err != nil || string(data) != "Hello, world!\n" {
		t.Fatalf("hello.txt = %q, %v", data, err)
	}
	// The order on the channel: task → lead to worker → worker to lead → DONE.
	msgs := h.messages()
	var got []string
	for _, ev := range msgs {
		who := map[string]string{h.agents["lead-1"].pk: "lead", h.agents["worker-1"].pk: "worker", task.PubKey: "user"}[ev.PubKey]
		var to []string
		for _, pk := range mentions(ev) {
			to = append(to, map[string]string{h.agents["lead-1"].pk: "lead", h.agents["worker-1"].pk: "worker", task.PubKey: "user"}[pk])
		}
		got = append(got, who+"→"+strings.Join(to, ","))
	}
	want := []string{"user→lead", "lead→worker", "worker→lead", "lead→user"}
	if !slices.Equal(got, want) {
		t.Fatalf("channel flow %v, want %v", got, want)
	}
	// Every model call was metered, and the logs say what each agent did.
	// Turns go on for one more call after their last message (a closing
	// answer): wait for the lead's two turns and the worker's one to end.
	for end := time.Now().Add(10 * time.Second); (len(h.logLines("lead-1", "turn end")) < 2 || len(h.logLines("worker-1", "turn end")) < 1) && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	perAgent, _ := h.trial.Usage()
	if perAgent["lead-1"].Calls != 5 || perAgent["worker-1"].Calls != 4 {
		t.Errorf("model calls: lead %d, worker %d; want 5 and 4", perAgent["lead-1"].Calls, perAgent["worker-1"].Calls)
	}
	for _, id := range []string{"lead-1", "worker-1"} {
		for _, msg := range []string{"turn start", "model call", "tool call", "turn end"} {
			if len(h.logLines(id, msg)) == 0 {
				t.Errorf("%s logged no %q line", id, msg)
			}
		}
	}
	if tools := h.logLines("worker-1", "tool call"); len(tools) < 3 || tools[0]["tool"] != "write_file" || tools[0]["agent"] != "worker-1" {
		t.Errorf("worker's tool calls logged as %v", tools)
	}
	// No secret reaches a log.
	for id, p := range h.agents {
		logs := p.logs.String()
		if strings.Contains(logs, h.trial.Token(id).Reveal()) {
			t.Errorf("%s logged its gateway token", id)
		}
	}
}

func TestWorkerCannotEndTheTrial(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{scenario: "worker-done"}, lead, worker)
	h.post("start", "lead-1")
	workerDone := h.waitMessage("worker-1", "DONE: I did the work", 20*time.Second)
	if !slices.Equal(mentions(workerDone), []string{h.agents["lead-1"].pk}) {
		t.Errorf("the worker's message mentions %v; the role lead should resolve to the lead", mentions(workerDone))
	}
	done := h.waitDone(20 * time.Second)
	if done.PubKey != h.agents["lead-1"].pk || done.ID == workerDone.ID {
		t.Fatalf("the trial ended with %q from %s", done.Content, done.PubKey)
	}
	if n := h.ch.Stats().IgnoredDone; n != 1 {
		t.Errorf("ignored DONE: count %d, want 1", n)
	}
}

func TestUnknownMentionIsAnErrorForTheModel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{scenario: "unknown-mention"}, solo)
	user := h.post("start", "solo-1")
	done := h.waitDone(20 * time.Second)
	if !slices.Equal(mentions(done), []string{user.PubKey}) {
		t.Errorf("DONE: mentions %v, want the user", mentions(done))
	}
	for _, ev := range h.messages() {
		if strings.Contains(ev.Content, "nobody") {
			t.Errorf("a message with an unknown mention was sent: %q", ev.Content)
		}
	}
	failed := h.logLines("solo-1", "tool call")
	if len(failed) == 0 || failed[0]["failed"] != true || !strings.Contains(fmt.Sprint(failed[0]["result"]), "unknown teammate nobody") {
		t.Errorf("the first tool call was logged as %v", failed)
	}
}

func TestRateLimitIsRetriedAfterRetryAfter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{scenario: "retry"}, solo)
	start := time.Now()
	h.post("start", "solo-1")
	h.waitDone(20 * time.Second)
	if took := time.Since(start); took < time.Second {
		t.Errorf("DONE: after %s: Retry-After 1 was not honoured", took)
	}
	retries := h.logLines("solo-1", "model call will be retried")
	if len(retries) != 1 || retries[0]["status"] != float64(429) || retries[0]["wait"] != "1s" {
		t.Errorf("retries logged as %v", retries)
	}
}

// An answer in plain text reaches nobody: the agent reminds the model once
// per turn, so an orchestrator that answers DONE: in text still ends the
// trial instead of leaving it to its deadline.
func TestPlainAnswerIsRemindedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{scenario: "plain"}, solo)
	h.post("start", "solo-1")
	h.waitDone(20 * time.Second) // the DONE: came through send_message
	if n := len(h.logLines("solo-1", "final answer (not sent; only send_message reaches the channel)")); n < 1 {
		t.Error("the plain answer was not logged")
	}
}

// A relay connection lost mid-trial is made again, without an identity
// conflict, and the agent still answers.
func TestReconnectsAfterALostConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{scenario: "plain", proxy: true}, solo)
	deadline := time.Now().Add(15 * time.Second)
	for len(h.logLines("solo-1", "connected")) < 1 { // ready, and knows it
		if time.Now().After(deadline) {
			t.Fatal("the agent never logged its connection")
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.proxy.cut()
	for len(h.logLines("solo-1", "connected")) < 2 {
		if time.Now().After(deadline) {
			h.dump()
			t.Fatal("the agent did not reconnect")
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.post("start", "solo-1")
	h.waitDone(20 * time.Second)
	if n := h.ch.Stats().IdentityConflicts; n != 0 {
		t.Errorf("%d identity conflicts on reconnecting", n)
	}
}

func TestBudgetRefusalIsReportedThenIdle(t *testing.T) {
	t.Parallel()
	one := int64(1)
	budgeted := solo
	budgeted.budget = manifest.Budget{MaxCalls: &one}
	h := newHarness(t, harnessOptions{scenario: "budget"}, budgeted)
	user := h.post("start", "solo-1")
	report := h.waitMessage("solo-1", "I cannot continue", 20*time.Second)
	if !strings.Contains(report.Content, "budget is exhausted") || !slices.Equal(mentions(report), []string{user.PubKey}) {
		t.Errorf("report %q mentions %v; want the budget named and the user mentioned", report.Content, mentions(report))
	}
	// Idle: another mention starts no model call, and the agent stays up.
	h.post("are you there?", "solo-1")
	time.Sleep(1500 * time.Millisecond)
	if perAgent, _ := h.trial.Usage(); perAgent["solo-1"].Calls != 1 {
		t.Errorf("%d model calls were metered; the idle agent should have made no more after its budget", perAgent["solo-1"].Calls)
	}
	if n := len(h.logLines("solo-1", "turn start")); n != 1 {
		t.Errorf("%d turns started; an idle agent takes none", n)
	}
	if !h.agents["solo-1"].running() {
		t.Errorf("the agent exited; it should stay idle until TERM")
	}
	select {
	case <-h.ch.Done():
		t.Errorf("the trial ended: %q", h.ch.DoneEvent().Content)
	default:
	}
}

// The agent stops by itself before its deadline, ending the shell command
// it was running.
func TestDeadlineIsRespected(t *testing.T) {
	t.Parallel()
	// 9 s: the agent stops 2 s before its deadline and starts no call with
	// less than 3 s left, which leaves 4 s for its start and first call on
	// a loaded machine (with 6 s, CI's start alone took the one left).
	h := newHarness(t, harnessOptions{scenario: "sleep", deadline: 9 * time.Second}, solo)
	deadline := h.start.Add(9 * time.Second)
	h.post("start", "solo-1")
	h.waitFile("shell.pid", 8*time.Second)
	p := h.waitExit("solo-1", 13*time.Second)
	if p.at.After(deadline) {
		t.Errorf("the agent exited %s after its deadline", p.at.Sub(deadline))
	}
	h.processGone("shell.pid")
	if stops := h.logLines("solo-1", "stop"); len(stops) != 1 {
		t.Errorf("stop logged %d times", len(stops))
	}
}

func TestTermEndsTheAgentAndItsCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{scenario: "sleep"}, solo)
	h.post("start", "solo-1")
	h.waitFile("shell.pid", 5*time.Second)
	sent := time.Now()
	h.agents["solo-1"].cmd.Process.Signal(syscall.SIGTERM)
	p := h.waitExit("solo-1", 5*time.Second)
	if took := p.at.Sub(sent); took > 3*time.Second {
		t.Errorf("the agent took %s to exit after TERM", took)
	}
	h.processGone("shell.pid")
}

// openAIUpstream is a plain OpenAI-compatible server, not troupe's gateway:
// it checks the request the way a provider would and scripts two answers.
type openAIUpstream struct {
	t        *testing.T
	mu       sync.Mutex
	requests []map[string]any
}

func (u *openAIUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	if r.Header.Get("Authorization") != "Bearer sk-upstream-test" {
		http.Error(w, `{"error":{"message":"bad key","type":"invalid_request_error"}}`, http.StatusUnauthorized)
		return
	}
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.requests = append(u.requests, req)
	n := len(u.requests)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	usage := `"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}`
	if n == 1 {
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"send_message","arguments":"{\"content\":\"DONE: answered by a plain upstream.\",\"mentions\":[\"user\"]}"}}]}}],%s}`, usage)
		return
	}
	fmt.Fprintf(w, `{"id":"c2","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"All done."}}],%s}`, usage)
}

func TestPlainOpenAICompatibleUpstream(t *testing.T) {
	t.Parallel()
	up := &openAIUpstream{t: t}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	h := newHarness(t, harnessOptions{baseURL: srv.URL + "/v1", token: "sk-upstream-test", model: "gpt-test", system: "You are the only agent."}, solo)
	h.post("Say you are done.", "solo-1")
	done := h.waitDone(20 * time.Second)
	if done.Content != "DONE: answered by a plain upstream." {
		t.Errorf("DONE: content %q", done.Content)
	}
	// Wait for the second call (the tool result going back).
	end := time.Now().Add(5 * time.Second)
	for {
		up.mu.Lock()
		n := len(up.requests)
		up.mu.Unlock()
		if n >= 2 || time.Now().After(end) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.requests) != 2 {
		t.Fatalf("the upstream got %d requests, want 2", len(up.requests))
	}
	first := up.requests[0]
	if first["model"] != "gpt-test" {
		t.Errorf("model %v", first["model"])
	}
	var tools []string
	for _, tl := range first["tools"].([]any) {
		tools = append(tools, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	if want := []string{"shell", "read_file", "write_file", "list_dir", "send_message"}; !slices.Equal(tools, want) {
		t.Errorf("tools %v, want %v", tools, want)
	}
	msgs := first["messages"].([]any)
	system := msgs[0].(map[string]any)
	if system["role"] != "system" || !strings.HasPrefix(system["content"].(string), "You are the only agent.") ||
		!strings.Contains(system["content"].(string), "Time left before the deadline: ") {
		t.Errorf("system message %v", system)
	}
	last := msgs[len(msgs)-1].(map[string]any)
	if last["role"] != "user" || !strings.Contains(last["content"].(string), "Say you are done.") {
		t.Errorf("last message %v", last)
	}
	// The tool result goes back with the call's id.
	second := up.requests[1]["messages"].([]any)
	result := second[len(second)-1].(map[string]any)
	if result["role"] != "tool" || result["tool_call_id"] != "call_1" || result["content"] != "sent" {
		t.Errorf("tool result %v", result)
	}
}
