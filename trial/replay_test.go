package trial

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

const teamManifest = "../examples/manifests/team.yaml"

// replayOf runs a trial again as a replay of the one in dir.
func replayOf(t *testing.T, env *Env, spec Spec, dir string, policy modelcall.DivergencePolicy) (*trialdir.TrialResult, string) {
	t.Helper()
	rp, err := LoadReplay(dir, policy)
	if err != nil {
		t.Fatal(err)
	}
	spec.Replay = rp
	return runSpec(t, env, spec)
}

// sameAsRecorded fails the test unless the replay in dir played the
// recording in recDir as it was: no divergence, the same outcome and
// channel messages, and every call answered from the recording.
func sameAsRecorded(t *testing.T, rec, res *trialdir.TrialResult, recDir, dir string) {
	t.Helper()
	if res.Outcome != rec.Outcome || res.Replay == nil || !res.Replay.Reproduced() || res.Replay.RecordedOutcome != rec.Outcome {
		t.Fatalf("replay: %s (recorded %s), %+v", res.Outcome, rec.Outcome, res.Replay.ReplayReport)
	}
	td, err := CompareTranscripts(recDir, dir)
	if err != nil || td.At != 0 || td.Recorded < 2 {
		t.Errorf("transcripts: %v %+v was %+v is %+v", err, td, td.Was, td.Is)
	}
	replayed, cut := 0, 0
	for _, a := range res.Replay.Agents {
		replayed += a.Replayed
		if a.Live+a.Refused != 0 || a.LiveCostUSD != 0 {
			t.Errorf("%+v", a)
		}
		for _, r := range readRecords(t, filepath.Join(dir, "agents", a.ID, "llm-calls.jsonl")) {
			if r.ErrorClass == modelcall.ClassDisconnect || r.Uncounted {
				// The trial's end cut it or refused it (a call after the
				// DONE: reaches the gateway or not by timing), as it may
				// have in the recording; it is not counted either way.
				cut++
				continue
			}
			if !r.Replayed {
				t.Errorf("%s: a call not replayed: %+v", a.ID, r)
			}
		}
	}
	if replayed == 0 || int64(replayed) > res.AgentResult.NCalls {
		t.Errorf("%d calls replayed and %d cut of %d", replayed, cut, res.AgentResult.NCalls)
	}
}

func readRecords(t *testing.T, file string) []modelcall.Record {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []modelcall.Record
	for line := range bytes.Lines(data) {
		var r modelcall.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestReplayTeamTrial: a mock team trial, recorded, then replayed: the
// same channel messages and outcome, no divergence. With the worker's
// persona changed the replay diverges at worker-1's first call, and stops
// there, or goes on live.
func TestReplayTeamTrial(t *testing.T) {
	env := testEnv(t)
	spec := Spec{Name: "hello-world__hello-team-mock__1", Team: team(t, teamManifest), ManifestPath: teamManifest, Task: loadTask(t, helloWorld), Attempt: 1}
	rec, recDir := runSpec(t, env, spec)
	if rec.Outcome != outcome.Passed {
		t.Fatalf("the recorded trial: %s %+v", rec.Outcome, rec.ExceptionInfo)
	}

	t.Run("unchanged", func(t *testing.T) {
		res, dir := replayOf(t, env, spec, recDir, modelcall.DivergeStop)
		sameAsRecorded(t, rec, res, recDir, dir)
	})

	changed := changedWorkerPersona(t)
	changedSpec := spec
	changedSpec.Team, changedSpec.ManifestPath = team(t, changed), changed
	t.Run("a changed persona stops the replay", func(t *testing.T) {
		res, _ := replayOf(t, env, changedSpec, recDir, modelcall.DivergeStop)
		if res.CompletionReason != ReplayDiverged || res.Outcome != outcome.Cancelled || res.ExceptionInfo == nil || res.ExceptionInfo.ExceptionType != ErrReplayDiverged {
			t.Fatalf("%s %s %+v", res.CompletionReason, res.Outcome, res.ExceptionInfo)
		}
		ds := res.Replay.Divergences
		if len(ds) != 1 || ds[0].Agent != "worker-1" || ds[0].Call != 1 || !strings.Contains(ds[0].Diff, "+    Always say please.") {
			t.Fatalf("%+v", ds)
		}
		if res.Replay.Agents[0].ID != "lead-1" || res.Replay.Agents[0].Replayed < 1 {
			t.Errorf("the lead's first call was the recording's: %+v", res.Replay.Agents[0])
		}
		if res.Verifier.StartedAt != nil {
			t.Error("a stopped replay was verified")
		}
	})
	t.Run("a changed persona goes on live", func(t *testing.T) {
		res, _ := replayOf(t, env, changedSpec, recDir, modelcall.DivergeLive)
		if res.Outcome != outcome.Passed || len(res.Replay.Divergences) != 1 {
			t.Fatalf("%s %+v", res.Outcome, res.Replay.ReplayReport)
		}
		for _, a := range res.Replay.Agents {
			if a.ID == "worker-1" && (a.Replayed != 0 || a.Live != int(res.Agents[1].Usage.Calls) || a.Live == 0) {
				t.Errorf("%+v", a)
			}
		}
	})
}

// TestReplayAcrossScrubbing: an agent printed its own key and token in a
// tool result, which its next request carried: the record holds them
// redacted, and the replay, whose agent prints its own (other) ones, asks
// the same once both are scrubbed alike.
func TestReplayAcrossScrubbing(t *testing.T) {
	env := testEnv(t)
	const m = "testdata/manifests/print-secrets.yaml"
	spec := Spec{Name: "hello-world__test-print-secrets__1", Team: team(t, m), ManifestPath: m, Task: loadTask(t, helloWorld), Attempt: 1}
	rec, recDir := runSpec(t, env, spec)
	if rec.CompletionReason != DeclaredDone {
		t.Fatalf("the recorded trial: %s %+v", rec.CompletionReason, rec.ExceptionInfo)
	}
	calls, _, err := modelcall.ReadConversation(bytes.NewReader(readPlain(t, filepath.Join(recDir, filepath.FromSlash(trialdir.Conversation("solo-1"))))))
	if err != nil || len(calls) < 2 {
		t.Fatalf("the record: %d calls, %v", len(calls), err)
	}
	if req := string(calls[1].Request); strings.Count(req, "[redacted by troupe]") < 3 {
		t.Fatalf("the second request does not carry the redacted key and token: %.3000s", req)
	}
	res, dir := replayOf(t, env, spec, recDir, modelcall.DivergeStop)
	sameAsRecorded(t, rec, res, recDir, dir)
}

// changedWorkerPersona writes the team manifest with one line added to
// the workers' persona, pinned, and returns its path.
func changedWorkerPersona(t *testing.T) string {
	t.Helper()
	var persona []byte
	for _, a := range team(t, teamManifest).Agents {
		if a.Role == "implementer" {
			persona = append(append([]byte{}, a.Prompt...), "\nAlways say please.\n"...)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "worker.md"), persona, 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(teamManifest)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(persona)
	m := strings.Replace(string(data), `path: "troupe:worker"`, `path: worker.md`, 1)
	m = strings.Replace(m, "e0039537740e2c2b20439d7cfbcb65741cb7722807e73c21daf9481195ef289f", hex.EncodeToString(sum[:]), 1)
	path := filepath.Join(dir, "team.yaml")
	if err := os.WriteFile(path, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeOpenAI is a model server in OpenAI's chat completions format that
// plays hello-world: write the file, report DONE:, then say so.
type fakeOpenAI struct{ calls atomic.Int32 }

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.calls.Add(1)
	var req struct {
		Messages []struct {
			Role      string          `json:"role"`
			Content   any             `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"not a chat completion"}}`, http.StatusBadRequest)
		return
	}
	last := req.Messages[len(req.Messages)-1]
	sent := false
	for _, m := range req.Messages {
		sent = sent || bytes.Contains(m.ToolCalls, []byte("send_message"))
	}
	message := map[string]any{"role": "assistant", "content": "The file is written and the user told."}
	finish := "stop"
	call := func(name, args string) {
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": fmt.Sprintf("call_%d", n), "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}
		finish = "tool_calls"
	}
	switch text := fmt.Sprint(last.Content); {
	case last.Role == "user" && strings.Contains(text, "hello.txt"):
		call("shell", `{"command":"printf 'Hello, world!\\n' > /app/hello.txt && cat /app/hello.txt"}`)
	case last.Role == "tool" && strings.Contains(text, "Hello, world!") && !sent:
		call("send_message", `{"content":"DONE: /app/hello.txt holds Hello, world! (checked with cat)","mentions":["user"]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": "fake-model",
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 500, "completion_tokens": 40, "total_tokens": 540}})
}

// TestReplayWithTheUpstreamOff: a trial against a real-format upstream,
// recorded, then replayed with the upstream switched off.
func TestReplayWithTheUpstreamOff(t *testing.T) {
	fake := &fakeOpenAI{}
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	env := testEnvWith(t, llm.Endpoints{"fake": {Name: "fake", API: modelcall.OpenAI, BaseURL: up.URL + "/v1", Model: "fake-model"}})
	const manifestPath = "testdata/manifests/upstream.yaml"
	spec := Spec{Name: "hello-world__upstream__1", Team: team(t, manifestPath), ManifestPath: manifestPath, Task: loadTask(t, helloWorld), Attempt: 1}
	rec, recDir := runSpec(t, env, spec)
	if rec.Outcome != outcome.Passed || rec.AgentResult.CostUSD == 0 {
		t.Fatalf("the recorded trial: %s, $%v, %+v", rec.Outcome, rec.AgentResult.CostUSD, rec.ExceptionInfo)
	}
	up.Close()
	asked := fake.calls.Load()
	res, dir := replayOf(t, env, spec, recDir, modelcall.DivergeStop)
	sameAsRecorded(t, rec, res, recDir, dir)
	if fake.calls.Load() != asked {
		t.Error("the replay called the upstream")
	}
	// Replayed calls are metered as recorded: the budgets act as they did.
	answered := 0
	for _, r := range readRecords(t, filepath.Join(dir, "agents", "solo-1", "llm-calls.jsonl")) {
		if r.Replayed && r.Status == http.StatusOK {
			answered++
		}
	}
	if answered < 2 || res.AgentResult.NInputTokens != int64(answered)*500 || res.AgentResult.CostUSD == 0 {
		t.Errorf("%+v", res.AgentResult)
	}
}
