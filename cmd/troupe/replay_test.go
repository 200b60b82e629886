package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/report"
)

// TestReplayCommand: troupe replay of a recorded mock team trial
// reproduces it (exit 0); with the worker's persona changed it reports the
// first divergence, at worker-1's first call, with the diff (exit 4); a
// folder it cannot replay says why.
func TestReplayCommand(t *testing.T) {
	exampleTeam, helloWorld := repoPath(t, "examples/manifests/team.yaml"), repoPath(t, "examples/tasks/hello-world")
	dir := isolate(t)
	// The example team, priced: a replay's recorded cost is then told
	// from what it spent.
	data, err := os.ReadFile(exampleTeam)
	if err != nil {
		t.Fatal(err)
	}
	teamFile := filepath.Join(dir, "priced", "team.yaml")
	write(t, teamFile, strings.Replace(string(data), "mock/hello-team: {input_per_million_usd: 0, cached_input_per_million_usd: 0, output_per_million_usd: 0}", "mock/hello-team: {input_per_million_usd: 3, cached_input_per_million_usd: 0.3, output_per_million_usd: 15}", 1))
	job := filepath.Join(dir, "job")
	code, out, errOut := troupe(t, "run", teamFile, "--tasks", helloWorld, "--out", job)
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	recorded := filepath.Join(job, "hello-world__hello-team-mock__1")

	code, out, errOut = troupe(t, "replay", recorded)
	if code != exitOK || !strings.Contains(out, "reproduced: the replay played its recording") || !strings.Contains(out, "worker-1     3 of 3 recorded calls replayed") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
	}
	// By default the replay is kept apart from jobs/, and compare never
	// takes it for one more trial of the roster, nor its recorded cost for
	// new spend.
	found, _ := filepath.Glob(filepath.Join(dir, "replays", "hello-world__hello-team-mock__1-*", "hello-world__hello-team-mock__1", "result.json"))
	if len(found) != 1 {
		t.Fatalf("the replay is not under replays/: %v", found)
	}
	firstReplay := filepath.Dir(filepath.Dir(found[0]))
	compared := func(args ...string) (trials int, cost float64, warnings []string) {
		t.Helper()
		code, out, errOut := troupe(t, append([]string{"compare", dir, "--format", "json"}, args...)...)
		var c struct {
			Conditions []struct {
				Trials int     `json:"n_trials"`
				Cost   float64 `json:"total_cost_usd"`
			} `json:"conditions"`
			Warnings []string `json:"warnings"`
		}
		if err := json.Unmarshal([]byte(out), &c); code != exitOK || err != nil || len(c.Conditions) != 1 {
			t.Fatalf("compare %v: exit %d, %v\n%s%s", args, code, err, out, errOut)
		}
		return c.Conditions[0].Trials, c.Conditions[0].Cost, c.Warnings
	}
	recordedCost := readCost(t, filepath.Join(recorded, "result.json"))
	if n, cost, warnings := compared(); n != 1 || cost != recordedCost || len(warnings) != 1 || !strings.HasPrefix(warnings[0], "1 replay of recorded trials left out") {
		t.Errorf("compare: %d trials, $%v (recorded $%v), warnings %q", n, cost, recordedCost, warnings)
	}
	if n, cost, warnings := compared("--include-replays"); n != 2 || cost != recordedCost || len(warnings) != 1 || !strings.Contains(warnings[0], "at what their live calls cost") {
		t.Errorf("compare --include-replays: %d trials, $%v (recorded $%v), warnings %q", n, cost, recordedCost, warnings)
	}
	if recordedCost == 0 {
		t.Error("the recorded trial cost nothing: the test cannot tell its cost from the replay's")
	}

	// The worker's persona, one line longer, pinned in a manifest of its own.
	code, persona, _ := troupe(t, "personas", "show", "worker")
	if code != exitOK {
		t.Fatal(persona)
	}
	persona += "Always say please.\n"
	write(t, filepath.Join(dir, "v2", "worker.md"), persona)
	v2 := strings.Replace(string(data), `path: "troupe:worker"`, "path: worker.md", 1)
	v2 = strings.Replace(v2, "e0039537740e2c2b20439d7cfbcb65741cb7722807e73c21daf9481195ef289f", sum(persona), 1)
	write(t, filepath.Join(dir, "v2", "team.yaml"), v2)
	code, out, errOut = troupe(t, "replay", recorded, "--manifest", filepath.Join(dir, "v2", "team.yaml"), "--json", "--out", filepath.Join(dir, "replay-2"))
	if code != exitDiverged || !strings.Contains(errOut, "the manifest is not the recorded one") {
		t.Fatalf("changed persona: exit %d\n%s%s", code, out, errOut)
	}
	var rep struct {
		Type       string `json:"type"`
		Reproduced bool   `json:"reproduced"`
		Outcome    string `json:"outcome"`
		Replay     struct {
			Divergences []struct {
				Agent string `json:"agent"`
				Call  int    `json:"call"`
				Diff  string `json:"diff"`
			} `json:"divergences"`
		} `json:"replay"`
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Type != "replay_report" || rep.Reproduced || rep.Outcome != "cancelled" || len(rep.Replay.Divergences) != 1 {
		t.Fatalf("%+v", rep)
	}
	if d := rep.Replay.Divergences[0]; d.Agent != "worker-1" || d.Call != 1 || !strings.Contains(d.Diff, "+    Always say please.") {
		t.Errorf("%+v", d)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay", job}, exitFailed, "is not a trial's folder (a job's?): give a trial folder, " + recorded},
		{[]string{"replay", dir}, exitFailed, "no result.json"},
		{[]string{"replay", recorded, "--out", firstReplay}, exitFailed, "is not empty: a replay runs in a folder of its own"},
		{[]string{"replay", recorded, "--on-divergence", "retry"}, exitUsage, "give stop"},
		{[]string{"replay"}, exitUsage, "accepts 1 arg"},
	} {
		code, out, errOut := troupe(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d\n%s%s", tc.args, code, out, errOut)
		}
	}
	// A trial that kept no conversation has nothing to replay.
	code, out, errOut = troupe(t, "run", teamFile, "--tasks", helloWorld, "--out", filepath.Join(dir, "meta"), "--record", "meta")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = troupe(t, "replay", filepath.Join(dir, "meta", "hello-world__hello-team-mock__1"))
	if code != exitFailed || !strings.Contains(errOut, "--record meta or none") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	// An answer edited in the record, in a way nothing downstream shows,
	// is found by every reader of the record, which names the line.
	viewer := httptest.NewServer(&report.Viewer{Dir: dir})
	defer viewer.Close()
	page := func() string {
		t.Helper()
		resp, err := http.Get(viewer.URL + "/conversation?agent=lead-1&t=" + url.QueryEscape("job/hello-world__hello-team-mock__1"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	if p := page(); !strings.Contains(p, "call 1") || strings.Contains(p, "does not verify") || strings.Contains(p, "has no digests") {
		t.Errorf("the viewer on the record as written:\n%.3000s", p)
	}
	record := filepath.Join(recorded, "agents", "lead-1", "llm-conversation.jsonl.gz")
	editRecord(t, record, `"answer":{`, `"answer":{"edited":true,`)
	if p := page(); !strings.Contains(p, "the record does not verify, and is shown only up to where it was changed: line ") {
		t.Errorf("the viewer on the tampered record:\n%.3000s", p)
	}
	for _, args := range [][]string{
		{"replay", recorded, "--out", filepath.Join(dir, "replay-3")},
		{"export", "atif", recorded, "--out", filepath.Join(dir, "atif")},
		{"scenario", "from-trial", recorded},
	} {
		code, out, errOut := troupe(t, args...)
		if code == exitOK || !strings.Contains(errOut, "llm-conversation.jsonl.gz") || !strings.Contains(errOut, "call 1 does not match its digest: the record was changed there") {
			t.Errorf("%s of a tampered record: exit %d\n%s%s", args[0], code, out, errOut)
		}
	}
}

// readCost is a trial's cost as its result.json says.
func readCost(t *testing.T, path string) float64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		AgentResult struct {
			CostUSD float64 `json:"cost_usd"`
		} `json:"agent_result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r.AgentResult.CostUSD
}

// editRecord replaces the first from in a gzipped record by to.
func editRecord(t *testing.T, path, from, to string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	f.Close()
	if err != nil || !bytes.Contains(data, []byte(from)) {
		t.Fatalf("%s: %v, or it holds no %q", path, err, from)
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(bytes.Replace(data, []byte(from), []byte(to), 1))
	zw.Close()
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
