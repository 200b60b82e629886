package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/trial/outcome"
)

// TestRunDryRunPrintsThePlan: troupe run --dry-run prints the whole plan
// (the job, its condition with each agent's stack, its task, stack and
// image, every trial in order and what a run would do with it), as a
// listing or, with --json, as the plan's JSON; on a folder an earlier run
// left, it says which trials are kept and which redone, and it writes
// nothing there.
func TestRunDryRunPrintsThePlan(t *testing.T) {
	solo, hello := repoPath(t, "examples/manifests/solo.yaml"), repoPath(t, "examples/tasks/hello-world")
	dir := isolate(t)
	args := []string{"run", solo, "--tasks", hello, "--attempts", "2", "--out", "job", "--dry-run"}
	code, out, errOut := troupe(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`^job job: 2 trials, at most 4 at once; 2 to run, 0 kept from an earlier run, 0 to redo; 2 retries of an infrastructure failure$`,
		`^conditions:\n  hello-solo-mock +` + regexp.QuoteMeta(solo) + ` +[0-9a-f]{64}\n    solo-1 +stack troupe-agent$`,
		`^tasks:\n  hello-world +` + regexp.QuoteMeta(hello) + ` +sha256:[0-9a-f]{64}$`,
		`^stacks:\n  troupe-agent +built in +sha256:[0-9a-f]{64} +used by hello-solo-mock$`,
		`^images:\n  hello-world +build ` + regexp.QuoteMeta(filepath.Join(hello, "environment")) + `, on a cluster troupe.local/troupe-env:[0-9a-f]{24}$`,
		`^trials \(attempts outermost, conditions innermost\):\n  hello-world__hello-solo-mock__1 +run\n  hello-world__hello-solo-mock__2 +run$`,
		`^pre-flight passed: 2 trials \(1 conditions × 1 tasks × 2 attempts\); nothing was started$`,
	} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(out) {
			t.Errorf("the listing does not match %s:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "job")); err == nil {
		t.Error("a dry run made the job folder")
	}

	// A folder an earlier run left: the first trial finished, the second
	// started and never ended.
	code, out, errOut = troupe(t, append(args, "--json")...)
	var plan job.Plan
	if err := json.Unmarshal([]byte(out), &plan); code != exitOK || err != nil || len(plan.Trials) != 2 || len(plan.Conditions) != 1 || len(plan.Tasks) != 1 {
		t.Fatalf("exit %d, %v:\n%s%s", code, err, out, errOut)
	}
	finished, _ := json.Marshal(map[string]any{"outcome": outcome.Passed, "manifest_sha256": plan.Conditions[0].ManifestHash, "task_checksum": plan.Tasks[0].Digest})
	write(t, filepath.Join(dir, "job", "hello-world__hello-solo-mock__1", "result.json"), string(finished))
	os.MkdirAll(filepath.Join(dir, "job", "hello-world__hello-solo-mock__2", "agents"), 0o755)
	code, out, errOut = troupe(t, args...)
	if code != exitOK || !strings.Contains(out, "0 to run, 1 kept from an earlier run, 1 to redo") ||
		!strings.Contains(out, "hello-world__hello-solo-mock__1  kept: passed\n  hello-world__hello-solo-mock__2  redo: unfinished\n") {
		t.Errorf("exit %d:\n%s%s", code, out, errOut)
	}
	code, out, _ = troupe(t, append(args, "--json")...)
	plan = job.Plan{}
	if err := json.Unmarshal([]byte(out), &plan); code != exitOK || err != nil || plan.Trials[0].State != job.Kept || plan.Trials[0].Outcome != outcome.Passed || plan.Trials[1].State != job.Redo || plan.Trials[1].Why != "unfinished" {
		t.Errorf("exit %d, %v:\n%s", code, err, out)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "job")); len(entries) != 2 {
		t.Errorf("the dry run wrote in the job folder: %v", entries)
	}
}

// A dry run says what it could not check of the programs a stack starts:
// here the one-shot agent troupe cli hosts, looked up in the agent's PATH
// in the container; --json carries it too.
func TestRunDryRunSaysWhatItCouldNotCheck(t *testing.T) {
	solo, hello := repoPath(t, "examples/manifests/solo.yaml"), repoPath(t, "examples/tasks/hello-world")
	dir := isolate(t)
	doc, err := os.ReadFile(solo)
	if err != nil {
		t.Fatal(err)
	}
	m := strings.Replace(string(doc), "model_revision:", "harness: claude\n    model_revision:", 1)
	if m == string(doc) {
		t.Fatal("solo.yaml has no model_revision to put the harness beside")
	}
	write(t, filepath.Join(dir, "m.yaml"), m)
	write(t, filepath.Join(dir, "stacks.yaml"), "stacks:\n  claude:\n    command: [/opt/troupe/bin/troupe, cli, --, claude, -p, \"{prompt}\"]\n")
	code, out, errOut := troupe(t, "run", "m.yaml", "--tasks", hello, "--dry-run")
	want := "    note: the agent troupe cli hosts: claude is looked up in the agent's PATH in the container: it must be in every task image the stack runs in (not checked here)\n"
	if code != exitOK || !strings.Contains(out, want) {
		t.Errorf("exit %d, want %q:\n%s%s", code, want, out, errOut)
	}
	code, out, _ = troupe(t, "run", "m.yaml", "--tasks", hello, "--dry-run", "--json")
	var plan job.Plan
	if err := json.Unmarshal([]byte(out), &plan); code != exitOK || err != nil || len(plan.Stacks) != 1 || len(plan.Stacks[0].Unchecked) != 1 {
		t.Errorf("exit %d, %v: %+v", code, err, plan.Stacks)
	}
}

// TestDryRunProbesEndpoints: the dry run asks each endpoint for its models
// with its key, so an endpoint on a closed port or a key the provider
// refuses is found before anything starts; an endpoint that answers
// passes, even one with no models route.
func TestDryRunProbesEndpoints(t *testing.T) {
	root, _ := filepath.Abs("../..")
	hello := filepath.Join(root, "examples/tasks/hello-world")
	doc, err := os.ReadFile(filepath.Join(root, "examples/manifests/solo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	var asked atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.URL.Path + " " + r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer sk-good" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		http.NotFound(w, r) // no models route: still there
	}))
	t.Cleanup(up.Close)
	dir := isolate(t)
	write(t, filepath.Join(dir, "m.yaml"), strings.ReplaceAll(string(doc), "mock/hello-solo", "prov"))
	for _, c := range []struct {
		name, baseURL, key string
		ok                 bool
		says               string
	}{
		{"closed port", "http://" + closed + "/v1", "sk-good", false, "endpoint prov cannot be reached at http://" + closed + "/v1"},
		{"key refused", up.URL + "/v1", "sk-bad", false, "endpoint prov: " + up.URL + "/v1 answered 401 to " + up.URL + "/v1/models: it refuses the key in $TROUPE_TEST_PROBE_KEY"},
		{"answers", up.URL + "/v1", "sk-good", true, "pre-flight passed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("TROUPE_TEST_PROBE_KEY", c.key)
			write(t, filepath.Join(dir, "troupe.yaml"), "endpoints:\n  prov:\n    api: openai\n    base_url: "+c.baseURL+"\n    api_key_env: TROUPE_TEST_PROBE_KEY\n    model: m\n")
			code, out, errOut := troupe(t, "run", "m.yaml", "--tasks", hello, "--dry-run")
			if (code == exitOK) != c.ok || !strings.Contains(out+errOut, c.says) {
				t.Errorf("exit %d, want %q:\n%s%s", code, c.says, out, errOut)
			}
			if strings.Contains(out+errOut, c.key) {
				t.Errorf("the output holds the key:\n%s%s", out, errOut)
			}
		})
	}
	if got, _ := asked.Load().(string); got != "/v1/models Bearer sk-good" {
		t.Errorf("the upstream was asked %q", got)
	}
}
