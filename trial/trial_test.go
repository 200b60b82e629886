package trial

import (
	"cmp"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

const helloWorld = "../examples/tasks/hello-world"

// runTrial runs one trial of a manifest on a task and returns its result
// and folder; a failure shows what the trial wrote.
func runTrial(t *testing.T, env *Env, manifestPath, taskDir string) (*trialdir.TrialResult, string) {
	t.Helper()
	tm := team(t, manifestPath)
	return runSpec(t, env, Spec{Name: "t__" + tm.Manifest.Condition + "__1", Team: tm, ManifestPath: manifestPath, Task: loadTask(t, taskDir), Attempt: 1})
}

// runSpec runs a trial in a folder of the test's and checks what every
// trial must leave.
func runSpec(t *testing.T, env *Env, spec Spec) (*trialdir.TrialResult, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "trial")
	spec.Dir = dir
	var events []Event
	res, err := Run(t.Context(), env, spec, func(e Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, dir)
		}
	})
	// Only an attack changes what the verifier runs: anything else on this
	// record is a false alarm of the system files check.
	if res.VerdictUntrusted && !strings.Contains(spec.ManifestPath, "attack-") {
		t.Errorf("the verdict of a trial that attacks nothing is marked untrusted: %v", res.SystemChanges)
	}
	// The result on disk is the one returned, and the events bracket the trial.
	onDisk, err := trialdir.ReadResult(filepath.Join(dir, "result.json"))
	if err != nil || onDisk.Outcome != res.Outcome || onDisk.CompletionReason != res.CompletionReason {
		t.Errorf("result.json: %v %+v", err, onDisk)
	}
	checkHarborFiles(t, dir)
	if len(events) < 2 || events[0].Type != EventStarted || events[len(events)-1].Type != EventFinished || events[len(events)-1].Outcome != res.Outcome {
		t.Errorf("events: %+v", events)
	}
	noSecrets(t, dir)
	return res, dir
}

// dump logs a trial folder's logs.
func dump(t *testing.T, dir string) {
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && (strings.HasSuffix(p, ".log") || strings.HasSuffix(p, ".txt") || strings.HasSuffix(p, "result.json")) {
			data, _ := os.ReadFile(p)
			t.Logf("%s:\n%s", p, data)
		}
		return nil
	})
}

func TestSoloAndTeamPassHelloWorld(t *testing.T) {
	env := testEnv(t)
	for _, m := range []string{"../examples/manifests/solo.yaml", "../examples/manifests/team.yaml", "../examples/manifests/peer.yaml"} {
		res, dir := runTrial(t, env, m, helloWorld)
		if res.Outcome != outcome.Passed || res.CompletionReason != DeclaredDone || res.Reward == nil || *res.Reward != 1 {
			t.Fatalf("%s: %s / %s", m, res.Outcome, res.CompletionReason)
		}
		if res.ExceptionInfo != nil || len(res.CleanupErrors) != 0 || res.Sweep == nil || len(res.Sweep.Survivors) != 0 {
			t.Errorf("%s: exception %v, cleanup %v, sweep %+v", m, res.ExceptionInfo, res.CleanupErrors, res.Sweep)
		}
		if res.Done == nil || !strings.HasPrefix(res.Done.Content, "DONE:") || res.AgentResult.NCalls == 0 {
			t.Errorf("%s: done %+v, usage %+v", m, res.Done, res.AgentResult)
		}
		for _, phase := range []trialdir.Timing{res.EnvironmentSetup, res.AgentSetup, res.AgentExecution, res.Verifier, res.Teardown} {
			if phase.StartedAt == nil || phase.FinishedAt == nil || phase.FinishedAt.Before(*phase.StartedAt) {
				t.Errorf("%s: a phase was not timed: %+v", m, phase)
			}
		}
		for _, f := range []string{"config.json", "trial.log", "relay/transcript.jsonl", "relay/audit.jsonl", "verifier/reward.txt", "verifier/test-stdout.txt"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: %v", m, err)
			}
		}
		for _, a := range res.Agents {
			for _, f := range []string{"system-prompt.md", "stdout.log", "stderr.log", "llm-calls.jsonl"} {
				if _, err := os.Stat(filepath.Join(dir, "agents", a.ID, f)); err != nil {
					t.Errorf("%s: %v", m, err)
				}
			}
			if a.UID <= agentUIDBase {
				t.Errorf("%s: agent %s ran as uid %d", m, a.ID, a.UID)
			}
		}
		var roster []struct{ ID, Role, Kind, Pubkey string }
		if data, err := os.ReadFile(filepath.Join(dir, "relay", "members.json")); err != nil || json.Unmarshal(data, &roster) != nil || len(roster) != len(res.Agents)+1 {
			t.Errorf("%s: members.json %v: %+v", m, err, roster)
		} else {
			for i, a := range res.Agents {
				if got := roster[i+1]; got.ID != a.ID || got.Pubkey != a.Pubkey || got.Role != a.Role {
					t.Errorf("%s: member %d is %+v, the result says %+v", m, i+1, got, a)
				}
			}
		}
		if strings.HasSuffix(m, "team.yaml") {
			checkTeamFlow(t, dir, res)
		}
	}
}

// checkTeamFlow reads the transcript: user → lead → worker → lead → DONE.
func checkTeamFlow(t *testing.T, dir string, res *trialdir.TrialResult) {
	names := map[string]string{}
	for _, a := range res.Agents {
		names[a.Pubkey] = a.ID
	}
	data, err := os.ReadFile(filepath.Join(dir, "relay", "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var flow []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			Seq   int
			Event nostr.Event
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Event.Kind != 9 {
			continue
		}
		if ok, _ := rec.Event.CheckSignature(); !ok {
			t.Errorf("transcript event %d has a bad signature", rec.Seq)
		}
		from := cmp.Or(names[rec.Event.PubKey], "user")
		var to []string
		for _, tag := range rec.Event.Tags {
			if len(tag) >= 2 && tag[0] == "p" {
				to = append(to, cmp.Or(names[tag[1]], "user"))
			}
		}
		entry := from + "→" + strings.Join(to, ",")
		if strings.HasPrefix(rec.Event.Content, "DONE:") {
			entry += " DONE"
		}
		flow = append(flow, entry)
	}
	want := []string{"user→lead-1", "lead-1→worker-1", "worker-1→lead-1", "lead-1→user DONE"}
	if !slices.Equal(flow, want) {
		t.Errorf("transcript flow %v, want %v", flow, want)
	}
}

func TestCompletionReasonsAndOutcomes(t *testing.T) {
	env := testEnv(t)
	for _, c := range []struct {
		manifest, task string
		reason         Reason
		want           outcome.Outcome
		errType        ErrorKind
		msg            string
		check          func(t *testing.T, res *trialdir.TrialResult, dir string)
	}{
		{manifest: "never-done", task: helloWorld, reason: Deadline, want: outcome.Failed, check: func(t *testing.T, res *trialdir.TrialResult, dir string) {
			if took := res.AgentExecution.FinishedAt.Sub(*res.AgentSetup.StartedAt); took < 3500*time.Millisecond || took > 9*time.Second { // agents stop 2s early
				t.Errorf("the 6s deadline ended the agents' work after %s", took)
			}
		}},
		{manifest: "budget", task: helloWorld, reason: BudgetExhausted, want: outcome.Failed, check: func(t *testing.T, res *trialdir.TrialResult, dir string) {
			if res.Agents[0].BudgetExhausted != "max_output_tokens" || res.Agents[0].Usage.Calls != 1 {
				t.Errorf("agent record %+v", res.Agents[0])
			}
		}},
		{manifest: "crash", task: helloWorld, reason: AgentsExited, want: outcome.Failed, check: func(t *testing.T, res *trialdir.TrialResult, dir string) {
			for _, a := range res.Agents {
				if a.ExitCode == nil || *a.ExitCode == 0 {
					t.Errorf("agent %s exit code %v; killed agents exit non-zero", a.ID, a.ExitCode)
				}
			}
		}},
		{manifest: "worker-done", task: helloWorld, reason: DeclaredDone, want: outcome.Passed, check: func(t *testing.T, res *trialdir.TrialResult, dir string) {
			if res.Relay.IgnoredDone != 1 || res.Done == nil || res.Done.Content != "DONE: the worker wrote /app/hello.txt." {
				t.Errorf("relay %+v, done %+v", res.Relay, res.Done)
			}
		}},
		{manifest: "wrong", task: helloWorld, reason: DeclaredDone, want: outcome.Failed, check: func(t *testing.T, res *trialdir.TrialResult, dir string) {
			if res.Reward == nil || *res.Reward != 0 || res.ExceptionInfo != nil {
				t.Errorf("reward %v, exception %v", res.Reward, res.ExceptionInfo)
			}
		}},
		{manifest: "solo-example", task: "testdata/tasks/broken-dockerfile", reason: InfraError, want: outcome.UnscoredInfra, errType: ErrImageBuild, msg: "troupe-test-build-step"},
		{manifest: "solo-example", task: "testdata/tasks/verifier-hangs", reason: DeclaredDone, want: outcome.VerifierError, errType: ErrVerifierTimeout, msg: "did not finish within 2s"},
		{manifest: "solo-example", task: "testdata/tasks/verifier-overwrites", reason: DeclaredDone, want: outcome.Passed, check: func(t *testing.T, res *trialdir.TrialResult, dir string) {
			for _, f := range []string{"relay/transcript.jsonl", "relay/members.json", "trial.log", "config.json", "verifier/test-stdout.txt"} {
				if data, _ := os.ReadFile(filepath.Join(dir, f)); strings.Contains(string(data), "FORGED") {
					t.Errorf("the verifier wrote over %s", f)
				}
			}
			if log, _ := os.ReadFile(filepath.Join(dir, "trial.log")); !strings.Contains(string(log), "a file of that name is already there") {
				t.Error("trial.log does not say which files of /logs were not copied")
			}
		}},
		{manifest: "root", task: helloWorld, reason: DeclaredDone, want: outcome.Passed, check: func(t *testing.T, res *trialdir.TrialResult, dir string) {
			if res.AgentUser != "root" || res.IdentitiesIsolated || res.Agents[0].UID != 0 {
				t.Errorf("agent_user %s, isolated %v, uid %d", res.AgentUser, res.IdentitiesIsolated, res.Agents[0].UID)
			}
		}},
	} {
		t.Run(c.manifest+"/"+filepath.Base(c.task), func(t *testing.T) {
			path := "testdata/manifests/" + c.manifest + ".yaml"
			if c.manifest == "solo-example" {
				path = "../examples/manifests/solo.yaml"
			}
			res, dir := runTrial(t, env, path, c.task)
			if res.CompletionReason != c.reason || res.Outcome != c.want {
				t.Fatalf("%s / %s, want %s / %s; exception %+v", res.CompletionReason, res.Outcome, c.reason, c.want, res.ExceptionInfo)
			}
			if c.errType != "" && (res.ExceptionInfo == nil || res.ExceptionInfo.ExceptionType != c.errType || !strings.Contains(res.ExceptionInfo.ExceptionMessage, c.msg)) {
				t.Errorf("exception %+v, want %s mentioning %q", res.ExceptionInfo, c.errType, c.msg)
			}
			if len(res.CleanupErrors) != 0 {
				t.Errorf("cleanup errors: %v", res.CleanupErrors)
			}
			if c.check != nil {
				c.check(t, res, dir)
			}
		})
	}
}

func TestIsolation(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-troupe-real-key-do-not-leak")
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/isolation.yaml", helloWorld)
	if res.CompletionReason != DeclaredDone {
		t.Fatalf("%s: %+v", res.CompletionReason, res.ExceptionInfo)
	}
	data, err := os.ReadFile(filepath.Join(dir, "artifacts", "isolation.txt"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(data)
	t.Logf("what the lead found:\n%s", report)
	for _, want := range []string{
		"uid=10001 gid=10000",
		"cannot-read-other-key", "cannot-read-other-token", "cannot-list-other", "can-read-own-key",
		"real-key-searched", "no-key-in-env",
		"network-unreachable", "interfaces=lo \n", "second-agent-exit=1", "wrote-workdir",
		"worker-environ-visible=0",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the probe did not report %q", want)
		}
	}
	for _, bad := range []string{"READ-OTHER", "LISTED-OTHER", "REACHED-NETWORK", "sk-troupe-real-key"} {
		if strings.Contains(report, bad) {
			t.Errorf("the probe reports %q", bad)
		}
	}
	if res.Relay.IdentityConflicts < 1 {
		t.Errorf("the second agent with the lead's key was not refused as an identity conflict: %+v", res.Relay)
	}
}

// TestEndingWithACallInFlightIsQuick: a trial that ends (here by the
// lead's DONE:) while a worker's model call hangs does not wait for an
// answer that will never be read.
func TestEndingWithACallInFlightIsQuick(t *testing.T) {
	env := testEnv(t)
	res, _ := runTrial(t, env, "testdata/manifests/hung-call.yaml", helloWorld)
	if res.CompletionReason != DeclaredDone {
		t.Fatalf("%s: %+v", res.CompletionReason, res.ExceptionInfo)
	}
	if after := res.FinishedAt.Sub(*res.AgentExecution.FinishedAt); after > 4*time.Second {
		t.Errorf("the trial took %s after the agents' work ended: it waited for the hung call", after.Round(time.Millisecond))
	}
	if len(res.CleanupErrors) != 0 {
		t.Errorf("cleanup errors: %v", res.CleanupErrors)
	}
}

// TestHarborKeysAreHonoured runs a task that uses Harbor's keys that change
// a trial: its agents run as [agent] user (identities then shared, and the
// result says so), its verifier as [verifier] user, both in [environment]
// workdir with [environment] env (a value taken from the host, and scrubbed
// from the trial's files like a minted secret); its healthcheck passes
// before the agents start, and its artifacts are collected.
func TestHarborKeysAreHonoured(t *testing.T) {
	hostValue := "host-value-" + randomHex(8)
	t.Setenv("TROUPE_TEST_HOSTVAL", hostValue)
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/harbor-keys.yaml", "testdata/tasks/harbor-keys")
	if res.Outcome != outcome.Passed {
		out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
		t.Fatalf("%s / %s %+v:\n%s", res.Outcome, res.CompletionReason, res.ExceptionInfo, out)
	}
	if res.AgentUser != "task:agent" || res.IdentitiesIsolated || res.Agents[0].UID != 2000 {
		t.Errorf("agent_user %s, isolated %v, uid %d", res.AgentUser, res.IdentitiesIsolated, res.Agents[0].UID)
	}
	for f, want := range map[string]string{"artifacts/report.txt": "report\n", "artifacts/outdir/a.txt": "a\n"} {
		if got, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(got) != want {
			t.Errorf("%s: %q %v", f, got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "artifacts/outdir/b.tmp")); err == nil {
		t.Error("an excluded artifact was collected")
	}
	var manifest []struct{ Source, Destination, Status string }
	if data, err := os.ReadFile(filepath.Join(dir, "artifacts", "manifest.json")); err != nil || json.Unmarshal(data, &manifest) != nil || len(manifest) != 2 || manifest[1].Destination != "artifacts/outdir" || manifest[1].Status != "ok" {
		t.Errorf("artifacts/manifest.json: %+v %v", manifest, err)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "trial.log")); !strings.Contains(string(log), "healthcheck passed") {
		t.Error("trial.log does not say the healthcheck passed")
	}
	grepFolder(t, dir, []string{hostValue})
	if stderr, _ := os.ReadFile(filepath.Join(dir, "agents", "solo-1", "stderr.log")); !strings.Contains(string(stderr), "the host's value is [redacted by troupe]") {
		t.Error("the host's value did not reach the agent's log, redacted: the test proves nothing")
	}
}

// TestUnhealthyTaskStartsNoAgent: a healthcheck that keeps failing ends the
// trial as unscored_infra before any agent starts.
func TestUnhealthyTaskStartsNoAgent(t *testing.T) {
	env := testEnv(t)
	res, _ := runTrial(t, env, "../examples/manifests/solo.yaml", "testdata/tasks/unhealthy")
	if res.Outcome != outcome.UnscoredInfra || res.ExceptionInfo == nil || res.ExceptionInfo.ExceptionType != ErrHealthcheck ||
		!strings.Contains(res.ExceptionInfo.ExceptionMessage, "failed 2 times in a row") || !strings.Contains(res.ExceptionInfo.ExceptionMessage, "not ready") {
		t.Fatalf("%s: %+v", res.Outcome, res.ExceptionInfo)
	}
	if res.AgentExecution.StartedAt != nil || res.AgentResult.NCalls != 0 {
		t.Errorf("an agent started: %+v", res.AgentResult)
	}
}
