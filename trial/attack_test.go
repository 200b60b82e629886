package trial

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"
	"github.com/troupebench/troupe/internal/capfile"
	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/trial/outcome"
)

// The tests here attack a trial from inside, as an agent that wants a verdict
// it did not earn or wants its secrets on the record, and check that troupe
// holds.

// escapeTask copies testdata/tasks/escape with the escaper program built
// into its image.
func escapeTask(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "escape")
	if err := os.CopyFS(dir, os.DirFS("testdata/tasks/escape")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "environment", "escaper"), "./testdata/escaper")
	cmd.Dir = "../runtime/inside"
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the escaper: %v\n%s", err, out)
	}
	return dir
}

// TestNoAgentCodeRunsAfterTheSweep: an agent leaves a process whose main
// thread exited (it shows as a zombie while another thread copies the
// verifier's answer into place) and a chain that ignores TERM and keeps
// starting its successor. Neither may act during the verifier: the trial
// fails, as the team never solved the task.
func TestNoAgentCodeRunsAfterTheSweep(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/attack-escape.yaml", escapeTask(t))
	out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
	if res.Outcome != outcome.Failed || strings.Contains(string(out), "FORGED") {
		t.Fatalf("outcome %s, reward %v: agent code ran during the verifier:\n%s", res.Outcome, res.Reward, out)
	}
	if res.Sweep == nil {
		t.Fatal("no sweep report")
	}
	var zombie, chain bool
	for _, p := range res.Sweep.Signalled {
		zombie = zombie || strings.Contains(p.Note, "main thread exited") && p.Kill
		chain = chain || strings.Contains(p.Cmd, "escaper chain")
	}
	if !zombie || !chain || len(res.Sweep.Survivors) != 0 {
		t.Errorf("the sweep report does not show both escapers killed: %+v", res.Sweep)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "trial.log")); !strings.Contains(string(log), "main thread exited") {
		t.Error("trial.log does not name the process whose main thread exited")
	}
}

// TestVerifierStartsClean: an agent running as root writes the reward
// before the verifier and plants a file among the tests. The verifier
// writes no reward of its own, so the trial is a verifier error, and what
// the agent left is removed and on the record.
func TestVerifierStartsClean(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/attack-prewrite.yaml", "testdata/tasks/no-reward")
	if res.Outcome != outcome.VerifierError || res.Reward != nil {
		t.Fatalf("outcome %s, reward %v: the agent's reward counted", res.Outcome, res.Reward)
	}
	removed := strings.Join(res.RemovedBeforeVerifier, "\n")
	for _, want := range []string{"/logs/verifier/reward.txt", "/tests/planted.sh"} {
		if !strings.Contains(removed, want) {
			t.Errorf("the result does not list %s as removed: %q", want, res.RemovedBeforeVerifier)
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "trial.log"))
	if !strings.Contains(string(log), "removed before the verifier ran") || !strings.Contains(string(log), "reward.txt") {
		t.Error("trial.log does not record what was removed")
	}
	if out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt")); strings.Contains(string(out), "planted") {
		t.Errorf("the verifier saw the planted file:\n%s", out)
	}
}

// TestNoSecretInAnyFile: an agent prints its key and token in its tool
// results, into its own stderr and into an artifact, and posts them in the
// channel. The verifier tells the
// test the trial's secrets (reversed, which no scrubber looks for); no file
// of the trial folder may hold any of them, in any form the trial knows.
func TestNoSecretInAnyFile(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/attack-leak.yaml", "testdata/tasks/reveal")
	if res.Outcome != outcome.Failed {
		t.Fatalf("outcome %s: %+v", res.Outcome, res.ExceptionInfo)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
	var secrets []string
	for line := range strings.Lines(string(out)) {
		if rev, ok := strings.CutPrefix(strings.TrimSpace(line), "reversed "); ok {
			r := []rune(rev)
			slices.Reverse(r)
			s := string(r)
			secrets = append(secrets, s, strings.ToUpper(s))
			if nsec, err := nip19.EncodePrivateKey(s); err == nil && len(s) == 64 {
				secrets = append(secrets, nsec)
			}
		}
	}
	if len(secrets) < 4 {
		t.Fatalf("the verifier revealed %d secrets; want the key and the token:\n%s", len(secrets), out)
	}
	grepFolder(t, dir, secrets)
	// The message that quoted the key was refused, and the refusal is on
	// the record; the trial went on to its DONE:.
	if res.Relay.Refusals < 1 || res.CompletionReason != DeclaredDone {
		t.Errorf("relay %+v, reason %s: the message with the key was not refused", res.Relay, res.CompletionReason)
	}
	if audit, _ := os.ReadFile(filepath.Join(dir, "relay", "audit.jsonl")); !strings.Contains(string(audit), "carries a secret key or token minted for this trial") {
		t.Errorf("the audit log does not record the refusal:\n%s", audit)
	}
	// The transcript is clean and still evidence: every event verifies.
	transcript, _ := os.ReadFile(filepath.Join(dir, "relay", "transcript.jsonl"))
	for line := range strings.Lines(string(transcript)) {
		var rec struct{ Event nostr.Event }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("transcript line %q: %v", line, err)
		}
		if ok, err := rec.Event.CheckSignature(); !ok || !rec.Event.CheckID() {
			t.Errorf("transcript event %q does not verify (%v): was it scrubbed after it was signed?", clip.Head(rec.Event.Content, 60), err)
		}
	}
	// The secrets reached the files and were replaced there: the test
	// would prove nothing if the agent had printed nothing.
	for _, f := range []string{"agents/solo-1/stderr.log", "artifacts/leak.txt", "artifacts/upper.txt"} {
		if data, _ := os.ReadFile(filepath.Join(dir, f)); !strings.Contains(string(data), secret.Redacted) {
			t.Errorf("%s shows no redaction: the attack did not reach it", f)
		}
	}
}

// grepFolder fails for every file under dir that holds one of the values.
func grepFolder(t *testing.T, dir string, values []string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data := readPlain(t, p)
		for _, v := range values {
			if bytes.Contains(data, []byte(v)) {
				t.Errorf("%s holds a secret the trial minted (%s…)", p, v[:6])
			}
		}
		return nil
	})
}

// TestAgentOutputIsBounded: an agent writes 30 MB into its own standard
// output, past the agent; the log keeps its bound's head and tail and says
// what it dropped.
func TestAgentOutputIsBounded(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/attack-flood.yaml", helloWorld)
	if res.CompletionReason != DeclaredDone {
		t.Fatalf("%s: %+v", res.CompletionReason, res.ExceptionInfo)
	}
	path := filepath.Join(dir, "agents", "solo-1", "stdout.log")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	lim := DefaultBounds.AgentOutput
	if info.Size() > lim.Head+lim.Tail+1024 {
		t.Errorf("stdout.log is %d bytes; the bound is %d", info.Size(), lim.Head+lim.Tail)
	}
	data, _ := os.ReadFile(path)
	if !bytes.Contains(data, []byte("first-line")) || !bytes.Contains(data, []byte("last-line")) || !bytes.Contains(data, []byte(capfile.TextMarkerPrefix)) {
		t.Error("stdout.log lacks its first line, its last line or the marker of what was dropped")
	}
	dropped := res.Truncated["agents/solo-1/stdout.log"]
	if dropped < 30_000_000-lim.Head-lim.Tail || dropped > 30_000_000 {
		t.Errorf("the result records %d bytes dropped from stdout.log: %v", dropped, res.Truncated)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "agents", "solo-1", ".*"))
	if len(left) != 0 {
		t.Errorf("chunk files left: %v", left)
	}
	var rec map[string]any
	if b, _ := os.ReadFile(filepath.Join(dir, "result.json")); json.Unmarshal(b, &rec) != nil || rec["truncated"] == nil {
		t.Error("result.json does not say which files were cut")
	}
}

// TestArtifactsCopiedWithTheAgentsRights: an isolated agent turns the task's
// artifact paths into links to files only root can read (a link inside an
// artifact folder, an artifact file that is a link, a folder on the
// artifact's path that is a link). Nothing of them reaches the trial
// folder: artifacts are copied with the agents' rights, through no link an
// agent made.
func TestArtifactsCopiedWithTheAgentsRights(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/attack-artifacts.yaml", "testdata/tasks/artifact-link")
	if res.Outcome != outcome.Passed {
		t.Fatalf("outcome %s (%s) %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "artifacts", "out", "result.txt")); err != nil || string(got) != "mine\n" {
		t.Errorf("the agent's own artifact was not copied: %q %v", got, err)
	}
	if stderr, _ := os.ReadFile(filepath.Join(dir, "agents", "solo-1", "stderr.log")); bytes.Contains(stderr, []byte("ROOT-ONLY-SECRET")) {
		t.Fatal("the agent could read the root-only file itself: the test proves nothing")
	}
	grepFolder(t, dir, []string{"ROOT-ONLY-SECRET-7f3a"})
	var manifest []struct{ Source, Status, Error string }
	data, err := os.ReadFile(filepath.Join(dir, "artifacts", "manifest.json"))
	if err != nil || json.Unmarshal(data, &manifest) != nil || len(manifest) != 3 {
		t.Fatalf("artifacts/manifest.json: %s %v", data, err)
	}
	if m := manifest[2]; m.Source != "/app/box/inner.txt" || m.Status != "failed" || !strings.Contains(m.Error, "symbolic link made by a user other than root") {
		t.Errorf("the artifact through the agent's link: %+v, want failed naming the link", m)
	}
}

// TestAgentsCannotReachTheHost: with the internet (the default for Harbor
// tasks), an agent tries a service listening on all of the host's
// addresses, through its network's gateway and every address of the host
// (docker0's among them). None answers: the host fence refuses them.
func TestAgentsCannotReachTheHost(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprint(w, "host service")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	targets := []string{fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			targets = append(targets, n.IP.String())
		}
	}
	task := filepath.Join(t.TempDir(), "host-probe")
	if err := os.CopyFS(task, os.DirFS("testdata/tasks/host-probe")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(task, "environment", "targets"), []byte(strings.Join(targets, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/attack-host.yaml", task)
	if res.Outcome != outcome.Passed {
		t.Fatalf("outcome %s (%s) %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "agents", "solo-1", "stderr.log"))
	if n := reached.Load(); n != 0 || regexp.MustCompile(`REACHED [0-9]`).Match(out) {
		t.Errorf("an agent reached the host's service %d times:\n%s", n, out)
	}
	if got := len(regexp.MustCompile(`refused [0-9]`).FindAll(out, -1)); got < len(targets) {
		t.Errorf("the agent tried %d addresses, want %d (gateway and host): the test proves nothing\n%s", got, len(targets), out)
	}
}

// TestChangedSystemFilesMarkTheVerdict: an agent running as root replaces
// /bin/sh with a wrapper that writes reward 1 after the verifier's script,
// on a task whose verifier writes none. Whatever the verdict, the result
// says it cannot be trusted and names the file.
func TestChangedSystemFilesMarkTheVerdict(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/attack-shell.yaml", "testdata/tasks/no-reward")
	if !res.SystemChecked || !res.VerdictUntrusted || !slices.Contains(res.SystemChanges, "modified /bin/sh") {
		t.Fatalf("outcome %s, reward %v, checked %v, untrusted %v, changes %v: the changed shell is not on the record",
			res.Outcome, res.Reward, res.SystemChecked, res.VerdictUntrusted, res.SystemChanges)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "trial.log")); !strings.Contains(string(log), "verdict is marked untrusted") {
		t.Error("trial.log does not say the verdict is untrusted")
	}
}

// TestSystemChanges: which differences from the image could change what
// the verifier runs.
func TestSystemChanges(t *testing.T) {
	ch := func(kind, p string) runtime.Change { return runtime.Change{Kind: kind, Path: p} }
	changes := []runtime.Change{
		ch("modified", "/usr"), ch("modified", "/usr/bin"), ch("modified", "/usr/bin/python3"),
		ch("modified", "/usr/local"), ch("modified", "/usr/local/bin"), ch("added", "/usr/local/bin/claude"), ch("added", "/usr/local/bin/sh"),
		ch("modified", "/usr/lib"), ch("modified", "/usr/lib/libssl.so.3"),
		ch("modified", "/etc"), ch("modified", "/etc/hosts"), ch("added", "/etc/ld.so.preload"),
		ch("modified", "/app"), ch("added", "/app/answer.txt"), ch("modified", "/root"), ch("added", "/root/.cache"),
		ch("added", "/opt/troupe/bin/troupe"), ch("deleted", "/bin/ls"), ch("added", "/tests"), ch("added", "/tests/x"),
	}
	shadows := []string{"/usr/local/bin/sh"}
	want := []string{"added /etc/ld.so.preload", "added /tests", "added /tests/x", "added /usr/local/bin/sh", "deleted /bin/ls", "modified /usr/bin/python3"}
	if got := systemChanges(changes, shadows, true); !slices.Equal(got, want) {
		t.Errorf("strict (an install):\n got %v\nwant %v", got, want)
	}
	want = append(want, "modified /usr/lib/libssl.so.3")
	slices.Sort(want)
	if got := systemChanges(changes, shadows, false); !slices.Equal(got, want) {
		t.Errorf("after the agents:\n got %v\nwant %v", got, want)
	}
}
