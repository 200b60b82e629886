package trial

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// buildStatic builds a package of troupe's module (or of a module it
// requires) as a static linux/amd64 binary, as trial containers run.
func buildStatic(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, output)
	}
	return out
}

// acpStack is a stack whose agent is an ACP agent behind troupe's bridge:
// the agent's binary uploaded and pinned, started by troupe acp, reading
// the gateway through the OpenAI variables the stack maps.
func acpStack(t *testing.T, name, bin string) *stack.Stack {
	t.Helper()
	to := "/opt/" + name + "/agent"
	return &stack.Stack{
		Name: name, Source: "the test",
		Files:   []stack.File{{Path: bin, To: to, Mode: 0o755, SHA256: fileDigest(t, bin)}},
		Command: []string{runtime.BinaryPath, "acp", "--", to},
		Env: map[string]string{
			"OPENAI_BASE_URL": stack.ValueLLMBaseURL,
			"OPENAI_API_KEY":  stack.ValueToken,
			"OPENAI_MODEL":    stack.ValueModel,
		},
		FixedEnv: map[string]string{"TROUPE_ACP_PERMISSION": "allow"},
	}
}

// runACP runs hello-world with a manifest whose worker runs st.
func runACP(t *testing.T, manifest string, st *stack.Stack) (*trialdir.TrialResult, string) {
	t.Helper()
	env := testEnv(t)
	dir := filepath.Join(t.TempDir(), "trial")
	res, err := Run(t.Context(), env, Spec{Name: "t__" + st.Name + "__1", Dir: dir, Team: team(t, manifest), ManifestPath: filepath.Base(manifest),
		Task: loadTask(t, helloWorld), Attempt: 1, Stacks: stack.Set{st.Name: st}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, dir)
		}
	})
	return res, dir
}

// logLines are an agent's JSON log lines whose msg is msg.
func logLines(t *testing.T, dir, agent, msg string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "agents", agent, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for line := range strings.SplitSeq(string(data), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// messages are the channel messages of the transcript.
func messages(t *testing.T, dir string) []nostr.Event {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "relay", "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []nostr.Event
	for line := range strings.SplitSeq(string(data), "\n") {
		var rec struct{ Event nostr.Event }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Event.Kind == 9 {
			out = append(out, rec.Event)
		}
	}
	return out
}

func agentRecord(t *testing.T, res *trialdir.TrialResult, id string) trialdir.AgentRecord {
	t.Helper()
	for _, a := range res.Agents {
		if a.ID == id {
			return a
		}
	}
	t.Fatalf("no agent %s in the result", id)
	return trialdir.AgentRecord{}
}

// TestACPWorkerPassesHelloWorld: a team whose lead is the reference agent
// and whose worker is an ACP agent (examples/stacks/acp-hello) behind
// troupe acp passes hello-world. The worker's model calls go through the
// gateway with the token its stack maps into OPENAI_API_KEY; it writes
// the file through the bridge's fs/write_text_file, checks it in a bridge
// terminal after asking permission, and reports with the MCP send_message
// tool; its log records every session update.
func TestACPWorkerPassesHelloWorld(t *testing.T) {
	st := acpStack(t, "acp-hello", buildStatic(t, "./examples/stacks/acp-hello"))
	res, dir := runACP(t, "testdata/manifests/acp-hello.yaml", st)
	if res.Outcome != outcome.Passed || res.CompletionReason != DeclaredDone {
		t.Fatalf("%s / %s %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo)
	}
	worker := agentRecord(t, res, "worker-1")
	if worker.Stack != "acp-hello" || worker.StackDigest != st.Digest() || worker.Usage.Calls != 4 {
		t.Errorf("worker: stack %s %s, %d model calls (want 4, through the gateway)", worker.Stack, worker.StackDigest, worker.Usage.Calls)
	}
	// The report reached the lead by the MCP tool, from the worker's key;
	// the bridge posted nothing else for it.
	var fromWorker []nostr.Event
	for _, ev := range messages(t, dir) {
		if ev.PubKey == worker.Pubkey {
			fromWorker = append(fromWorker, ev)
		}
	}
	lead := agentRecord(t, res, "lead-1")
	if len(fromWorker) != 1 || !strings.Contains(fromWorker[0].Content, "Wrote /app/hello.txt through ACP") || !fromWorker[0].Tags.ContainsAny("p", []string{lead.Pubkey}) {
		t.Errorf("the worker's messages: %+v", fromWorker)
	}
	if w := logLines(t, dir, "worker-1", "fs/write_text_file"); len(w) != 1 || w[0]["path"] != "/app/hello.txt" || w[0]["failed"] != false {
		t.Errorf("fs/write_text_file logged as %v", w)
	}
	if p := logLines(t, dir, "worker-1", "session/request_permission"); len(p) != 1 || p[0]["chosen"] != "run" {
		t.Errorf("permission logged as %v", p)
	}
	if w := logLines(t, dir, "worker-1", "terminal/wait_for_exit"); len(w) != 1 || w[0]["exit_code"] != float64(0) {
		t.Errorf("terminal logged as %v", w)
	}
	if m := logLines(t, dir, "worker-1", "mcp tool call"); len(m) != 1 || m[0]["tool"] != "send_message" || m[0]["failed"] != false {
		t.Errorf("team tools logged as %v", m)
	}
	kinds := map[string]int{}
	for _, l := range logLines(t, dir, "worker-1", "session/update") {
		kinds[l["kind"].(string)]++
	}
	if kinds["tool_call"] != 3 || kinds["tool_call_update"] != 3 || kinds["agent_message_chunk"] != 1 {
		t.Errorf("session updates by kind: %v", kinds)
	}
	if ends := logLines(t, dir, "worker-1", "turn end"); len(ends) != 1 || ends[0]["stop_reason"] != "end_turn" || ends[0]["sent"] != true || ends[0]["input_tokens"] == nil {
		t.Errorf("turn end logged as %v", ends)
	}
	noSecrets(t, dir)
}

// TestACPThirdPartyAgent: an ACP agent nobody here wrote, acp-go-sdk's own
// example/agent, built from the module, takes part as a worker: it is
// prompted, asks for permission, streams updates, and its final text
// reaches the lead in the channel (it never sends a message itself); the
// trial ends by the lead's DONE:.
func TestACPThirdPartyAgent(t *testing.T) {
	st := acpStack(t, "acp-example", buildStatic(t, "github.com/coder/acp-go-sdk/example/agent"))
	res, dir := runACP(t, "testdata/manifests/acp-example.yaml", st)
	if res.Outcome != outcome.Passed || res.CompletionReason != DeclaredDone {
		t.Fatalf("%s / %s %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo)
	}
	worker, lead := agentRecord(t, res, "worker-1"), agentRecord(t, res, "lead-1")
	var answer *nostr.Event
	for _, ev := range messages(t, dir) {
		if ev.PubKey == worker.Pubkey {
			answer = &ev
		}
	}
	if answer == nil || answer.Content != "Perfect! I've successfully updated the configuration. The changes have been applied." ||
		!answer.Tags.ContainsAny("p", []string{lead.Pubkey}) {
		t.Fatalf("the worker's answer in the transcript: %+v", answer)
	}
	if p := logLines(t, dir, "worker-1", "session/request_permission"); len(p) != 1 || p[0]["chosen"] != "allow" || p[0]["title"] != "Modifying critical configuration file" {
		t.Errorf("permission logged as %v", p)
	}
	kinds := map[string]int{}
	for _, l := range logLines(t, dir, "worker-1", "session/update") {
		kinds[l["kind"].(string)]++
	}
	if kinds["agent_message_chunk"] != 4 || kinds["tool_call"] != 2 || kinds["tool_call_update"] != 2 {
		t.Errorf("session updates by kind: %v", kinds)
	}
	if posted := logLines(t, dir, "worker-1", "posted the agent's answer"); len(posted) != 1 || posted[0]["to"] != "lead-1" {
		t.Errorf("the answer was posted as %v", posted)
	}
	if !strings.HasPrefix(res.Done.Content, "DONE: worker-1 updated the configuration") {
		t.Errorf("DONE: %q", res.Done.Content)
	}
	noSecrets(t, dir)
}

// TestACPLeadPassesHelloWorld: an ACP agent behind troupe acp leads a
// reference-agent worker: it delegates with send_message over MCP, reads
// the worker's file through the bridge's fs/read_text_file, and ends the
// trial with its own DONE:.
func TestACPLeadPassesHelloWorld(t *testing.T) {
	st := acpStack(t, "acp-hello", buildStatic(t, "./examples/stacks/acp-hello"))
	res, dir := runACP(t, "testdata/manifests/acp-lead.yaml", st)
	if res.Outcome != outcome.Passed || res.CompletionReason != DeclaredDone {
		t.Fatalf("%s / %s %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo)
	}
	lead := agentRecord(t, res, "lead-1")
	// Two turns: delegate and wait; then read, send DONE:, and say so.
	if lead.Stack != "acp-hello" || lead.Usage.Calls != 5 {
		t.Errorf("lead: stack %s, %d model calls (want 5)", lead.Stack, lead.Usage.Calls)
	}
	if res.Done == nil || !strings.HasPrefix(res.Done.Content, "DONE: /app/hello.txt holds Hello, world!") {
		t.Errorf("DONE: %+v", res.Done)
	}
	if m := logLines(t, dir, "lead-1", "mcp tool call"); len(m) != 2 || m[0]["tool"] != "send_message" || m[1]["tool"] != "send_message" {
		t.Errorf("team tools logged as %v", m)
	}
	if r := logLines(t, dir, "lead-1", "fs/read_text_file"); len(r) != 1 || r[0]["path"] != "/app/hello.txt" {
		t.Errorf("fs/read_text_file logged as %v", r)
	}
	noSecrets(t, dir)
}
