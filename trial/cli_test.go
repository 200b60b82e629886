package trial

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/trial/outcome"
)

// cliStack is a stack whose agent is examples/stacks/claude-sdk-agent, a
// one-shot agent made of Anthropic's Go SDK (its tool runner, agent
// toolset and MCP adapter), behind troupe cli: uploaded and pinned,
// probed with -h, given the team tools as an MCP config file, calling the
// gateway's Anthropic Messages API with the token the stack maps.
func cliStack(t *testing.T) *stack.Stack {
	t.Helper()
	bin := buildStatic(t, "./examples/stacks/claude-sdk-agent")
	const to = "/opt/claude-sdk/agent"
	return &stack.Stack{
		Name: "claude-sdk", Source: "the test",
		Files:   []stack.File{{Path: bin, To: to, Mode: 0o755, SHA256: fileDigest(t, bin)}},
		Command: []string{runtime.BinaryPath, "cli", "--probe=-h", "--", to, "--mcp-config", "{mcp_config}", "{prompt}"},
		Env: map[string]string{
			"ANTHROPIC_BASE_URL": stack.ValueLLMURL,
			"ANTHROPIC_API_KEY":  stack.ValueToken,
			"ANTHROPIC_MODEL":    stack.ValueModel,
		},
	}
}

// TestOneShotAgentAsWorkerAndAsLead: a one-shot agent behind troupe cli
// passes hello-world as the worker of a reference-agent lead, and, in
// another trial, as the lead of a reference-agent worker. Its model is
// scripted in the agent's own tool schema (the SDK toolset's write and
// read); it writes the file the verifier checks (as the worker), wakes
// the worker by naming it in its answer (as the lead), and ends the trial
// with the team tools' send_message over MCP, mid-run (as the lead).
func TestOneShotAgentAsWorkerAndAsLead(t *testing.T) {
	st := cliStack(t)
	t.Run("worker", func(t *testing.T) {
		res, dir := runACP(t, "testdata/manifests/cli-worker.yaml", st)
		if res.Outcome != outcome.Passed || res.CompletionReason != DeclaredDone {
			t.Fatalf("%s / %s %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo)
		}
		worker, lead := agentRecord(t, res, "worker-1"), agentRecord(t, res, "lead-1")
		if worker.Stack != "claude-sdk" || worker.StackDigest != st.Digest() || worker.Usage.Calls != 3 {
			t.Errorf("worker: stack %s %s, %d model calls (want 3: write, read, answer)", worker.Stack, worker.StackDigest, worker.Usage.Calls)
		}
		var answers []nostr.Event
		for _, ev := range messages(t, dir) {
			if ev.PubKey == worker.Pubkey {
				answers = append(answers, ev)
			}
		}
		if len(answers) != 1 || answers[0].Content != "Wrote /app/hello.txt; it reads: Hello, world!" || !answers[0].Tags.ContainsAny("p", []string{lead.Pubkey}) {
			t.Errorf("the worker's messages: %+v", answers)
		}
		if runs := logLines(t, dir, "worker-1", "turn end"); len(runs) != 1 || runs[0]["sent"] != false {
			t.Errorf("runs logged as %v", runs)
		}
		if p := logLines(t, dir, "worker-1", "probe"); len(p) != 1 || p[0]["failed"] != false {
			t.Errorf("probe logged as %v", p)
		}
		noSecrets(t, dir)
	})
	t.Run("lead", func(t *testing.T) {
		res, dir := runACP(t, "testdata/manifests/cli-lead.yaml", st)
		if res.Outcome != outcome.Passed || res.CompletionReason != DeclaredDone {
			t.Fatalf("%s / %s %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo)
		}
		lead, worker := agentRecord(t, res, "lead-1"), agentRecord(t, res, "worker-1")
		if lead.Stack != "claude-sdk" || lead.Usage.Calls != 4 {
			t.Errorf("lead: stack %s, %d model calls (want 4)", lead.Stack, lead.Usage.Calls)
		}
		var fromLead []nostr.Event
		for _, ev := range messages(t, dir) {
			if ev.PubKey == lead.Pubkey {
				fromLead = append(fromLead, ev)
			}
		}
		if len(fromLead) != 2 || !strings.HasPrefix(fromLead[0].Content, "@worker-1 Please create") || !fromLead[0].Tags.ContainsAny("p", []string{worker.Pubkey}) ||
			!strings.HasPrefix(fromLead[1].Content, "DONE: /app/hello.txt holds Hello, world!") {
			t.Errorf("the lead's messages: %+v", fromLead)
		}
		if m := logLines(t, dir, "lead-1", "mcp tool call"); len(m) != 1 || m[0]["tool"] != "send_message" {
			t.Errorf("team tools logged as %v", m)
		}
		if runs := logLines(t, dir, "lead-1", "turn end"); len(runs) != 2 || runs[1]["sent"] != true {
			t.Errorf("runs logged as %v", runs)
		}
		noSecrets(t, dir)
	})
}
