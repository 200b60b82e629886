package report

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testdata/cut is the worker-done trial of testdata/view as troupe writes
// it when its files hit their bounds: a marker where the middle of the
// transcript, lead-1's call log (40 calls dropped: the result records 44)
// and the audit was dropped, and a "[troupe: …]" line in lead-1's stderr,
// trial.log and the verifier's stdout.
const cutFixture = "testdata/cut"

const cutTrial = "job-cut/hello-world__test-worker-done__1"

func viewer(t *testing.T, dir string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(&Viewer{Dir: dir})
	t.Cleanup(srv.Close)
	return srv
}

// The viewer compares against the baseline chosen in the URL, offers every
// condition as one, keeps the choice in its links, and shows the
// comparison before the long list of trials.
func TestViewerBaselineChoice(t *testing.T) {
	srv := viewer(t, viewFixture)
	tests := []struct {
		name, query, against, other string
	}{
		{"default: the first by name", "/", "hello-team-mock", "test-worker-done"},
		{"chosen", "/?baseline=test-worker-done", "test-worker-done", "hello-team-mock"},
		{"chosen by hash prefix", "/?baseline=98f16124", "test-worker-done", "hello-team-mock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, page, _ := get(t, srv, tt.query)
			if code != 200 {
				t.Fatalf("%s: %d\n%s", tt.query, code, page)
			}
			if !strings.Contains(page, "<h2>Against "+tt.against+"</h2>") || !strings.Contains(page, `<strong>`+tt.against+`</strong>`) {
				t.Errorf("%s: not compared against %s", tt.query, tt.against)
			}
			// The other condition is a link that makes it the baseline.
			if !strings.Contains(page, `<a href="/?baseline=`+tt.other+`#comparison">`+tt.other+`</a>`) {
				t.Errorf("%s: no link to compare against %s", tt.query, tt.other)
			}
			// The comparison comes first, with a way to jump to each part.
			cmp, trials := strings.Index(page, `id="comparison"`), strings.Index(page, `id="trials"`)
			if cmp < 0 || trials < 0 || cmp > trials || !strings.Contains(page, `href="#trials"`) {
				t.Errorf("%s: the comparison (at %d) is not before the trials (at %d)", tt.query, cmp, trials)
			}
		})
	}
	// The choice lives in the trial links and comes back from a trial page.
	_, page, _ := get(t, srv, "/?baseline=test-worker-done")
	link := regexp.MustCompile(`href="(/trial\?[^"]+)"`).FindStringSubmatch(page)
	if link == nil || !strings.Contains(link[1], "baseline=test-worker-done") {
		t.Fatalf("a trial link does not keep the baseline: %v", link)
	}
	code, trialPage, _ := get(t, srv, strings.ReplaceAll(link[1], "&amp;", "&"))
	if code != 200 || !strings.Contains(trialPage, `<a href="/?baseline=test-worker-done">all jobs</a>`) {
		t.Errorf("the trial page does not lead back to the chosen baseline: %d", code)
	}
	// An unknown choice (an old link) shows the default and says why.
	code, page, _ = get(t, srv, "/?baseline=nobody")
	if code != 200 || !strings.Contains(page, `no condition &#34;nobody&#34;`) || !strings.Contains(page, "<h2>Against hello-team-mock</h2>") {
		t.Errorf("unknown baseline: %d", code)
	}
	if strings.Contains(page, "baseline=nobody") {
		t.Error("an unknown baseline is kept in the links")
	}
}

// An agent whose call log is missing: the table says so and agrees with
// its total, instead of "no calls" above "3 calls".
func TestViewerMissingCallLog(t *testing.T) {
	dir := copyFixture(t)
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(doneTrial), "agents", "worker-1", "llm-calls.jsonl")); err != nil {
		t.Fatal(err)
	}
	srv := viewer(t, dir)
	code, page, _ := get(t, srv, "/trial?t="+url.QueryEscape(doneTrial))
	if code != 200 {
		t.Fatalf("%d %s", code, page)
	}
	worker := agentSection(t, page, "worker-1")
	if strings.Contains(worker, "no calls") {
		t.Errorf("worker-1 says \"no calls\" beside its recorded calls:\n%s", worker)
	}
	for _, want := range []string{"the call log agents/worker-1/llm-calls.jsonl is missing; the result records 3 calls", "<td>3 calls</td>", "the result&#39;s count"} {
		if !strings.Contains(worker, want) {
			t.Errorf("worker-1 lacks %q:\n%s", want, worker)
		}
	}
	// lead-1's log is there: its calls are shown.
	if lead := agentSection(t, page, "lead-1"); strings.Count(lead, "<td>200</td>") != 4 {
		t.Errorf("lead-1's calls:\n%s", lead)
	}
}

// agentSection is an agent's part of the trial page: its heading to the
// next agent's.
func agentSection(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, "<h3>"+id+" ")
	if i < 0 {
		t.Fatalf("no section of %s", id)
	}
	rest := page[i+1:]
	if j := strings.Index(rest, "<h3>"); j >= 0 {
		rest = rest[:j]
	} else if j := strings.Index(rest, "<h2>Verifier"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// Files troupe cut to their bounds: each marker is a visible notice where
// the middle was dropped, and neither a message nor a call.
func TestViewerShowsCutFiles(t *testing.T) {
	srv := viewer(t, cutFixture)
	code, page, _ := get(t, srv, "/trial?t="+url.QueryEscape(cutTrial))
	if code != 200 {
		t.Fatalf("%d %s", code, page)
	}
	for _, want := range []string{
		`<li class="cut">✂ 81234 bytes (57 lines) dropped here</li>`,                        // transcript
		`<span class="cut">✂ 23456 bytes (40 lines) dropped here: no call of them is shown`, // lead-1's calls
		`✂ 987654 bytes (4321 lines) dropped here</span>`,                                   // lead-1's stderr
		`✂ 55555 bytes (444 lines) dropped here</span>`,                                     // trial.log
		`✂ 1048576 bytes (9000 lines) dropped here</span>`,                                  // verifier
		"81234 bytes of relay/transcript.jsonl were dropped when troupe wrote it",
		// A folded log says it was cut before it is opened.
		`log of lead-1 (stderr) <span class="warning">(cut when written: 987654 bytes dropped)</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("trial page lacks %q", want)
		}
	}
	// The transcript's four messages are all there, the DONE: marked.
	if n := strings.Count(page, `<span class="who">`); n != 4 || !strings.Contains(page, `<span class="badge done">DONE</span>`) {
		t.Errorf("%d messages", n)
	}
	// lead-1: 4 calls in the log, the marker no call; the total is the
	// result's 44, and nothing says "the first 4 calls are shown".
	lead := agentSection(t, page, "lead-1")
	if n := strings.Count(lead, "<td>200</td>"); n != 4 || strings.Contains(lead, "<td>0</td><td>0</td>") {
		t.Errorf("lead-1 shows %d calls, or the marker as one:\n%s", n, lead)
	}
	if !strings.Contains(lead, "<td>44 calls</td>") || strings.Contains(lead, "the first") || strings.Contains(lead, "the call log holds") {
		t.Errorf("lead-1's total or notes:\n%s", lead)
	}
	// The raw marker is kept as the notice's title.
	if !strings.Contains(page, `title="[troupe: 987654 bytes (4321 lines) dropped here; this file keeps its first 4 MiB and its last 4 MiB]"`) {
		t.Error("the text marker is not kept as the notice's title")
	}
	// The result's list of cut files is among the facts.
	if !strings.Contains(page, "relay/transcript.jsonl (81234 bytes dropped)") {
		t.Error("the facts do not list the files cut when written")
	}
}

// An agent writes its logs byte for byte: a line of its own that looks like
// troupe's marker, in a log the result does not list as cut, is its text,
// not a notice.
func TestViewerIgnoresForgedMarkers(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(cutFixture)); err != nil {
		t.Fatal(err)
	}
	stdout := filepath.Join(dir, filepath.FromSlash(cutTrial), "agents", "lead-1", "stdout.log")
	forged := "[troupe: 31337 bytes (7 lines) dropped here; this file keeps nothing]\n"
	if err := os.WriteFile(stdout, []byte("before\n"+forged+"after\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, page, _ := get(t, viewer(t, dir), "/trial?t="+url.QueryEscape(cutTrial))
	if strings.Contains(page, "✂ 31337 bytes") {
		t.Error("a forged marker in stdout.log, which the result does not list as cut, is shown as troupe's notice")
	}
	if !strings.Contains(page, "[troupe: 31337 bytes (7 lines) dropped here; this file keeps nothing]") {
		t.Error("the agent's own line is not shown as text")
	}
	// The real markers, in files the result lists, are still notices.
	if !strings.Contains(page, "✂ 987654 bytes (4321 lines) dropped here") {
		t.Error("the real marker in stderr.log is no longer a notice")
	}
}

// A running trial's call log counted by the page: a marker is no call.
func TestViewerCutCallLogOfARunningTrial(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(cutFixture)); err != nil {
		t.Fatal(err)
	}
	trial := filepath.Join(dir, filepath.FromSlash(cutTrial))
	// Running: config.json and the members the trial wrote when it
	// started, no result.json yet.
	var res struct {
		Agents []member `json:"agents"`
	}
	data, _ := os.ReadFile(filepath.Join(trial, "result.json"))
	if err := json.Unmarshal(data, &res); err != nil || len(res.Agents) == 0 {
		t.Fatalf("%v %+v", err, res)
	}
	members, _ := json.Marshal(res.Agents)
	os.WriteFile(filepath.Join(trial, "relay", "members.json"), members, 0o644)
	os.Remove(filepath.Join(trial, "result.json"))
	srv := viewer(t, dir)
	_, page, _ := get(t, srv, "/trial?t="+url.QueryEscape(cutTrial))
	if lead := agentSection(t, page, "lead-1"); !strings.Contains(lead, "<td>4 calls</td>") || !strings.Contains(lead, "counted in the call log") {
		t.Errorf("a running trial's cut call log is not counted by its calls:\n%s", lead)
	}
}

// A result the viewer cannot read is named on the index page, beside the
// comparison of the rest.
func TestViewerNamesUnreadableResults(t *testing.T) {
	dir := copyFixture(t)
	bad := filepath.Join(dir, "job-hello", "x__c__1", "result.json")
	os.MkdirAll(filepath.Dir(bad), 0o755)
	os.WriteFile(bad, []byte(`{"trial_name":"x__c__1","task_name":"x","condition":"c","outcome":"passed","reward":-1e300}`), 0o644)
	_, page, _ := get(t, viewer(t, dir), "/")
	if !strings.Contains(page, bad) || !strings.Contains(page, "implausible figures") || !strings.Contains(page, "<h2>Against hello-team-mock</h2>") {
		t.Errorf("the index does not name %s beside the comparison", bad)
	}
}

// FuzzCutMarkers: a log split at its markers loses nothing but the marker
// lines, and a JSONL line is a marker only with the marker's key first.
func FuzzCutMarkers(f *testing.F) {
	f.Add("a\n[troupe: 12 bytes (1 lines) dropped here]\nb\n", `{"troupe_truncated":{"dropped_bytes":1,"dropped_lines":2,"head_bytes":3,"tail_bytes":4}}`)
	f.Add("[troupe: ", `{"seq":1,"troupe_truncated":{}}`)
	f.Fuzz(func(t *testing.T, text, line string) {
		var kept, want strings.Builder
		for _, p := range splitCuts(text) {
			if p.Cut == nil {
				kept.WriteString(p.Text)
			} else if p.Cut.String() == "" && p.Cut.DroppedBytes >= 0 {
				t.Fatalf("an empty notice for %q", p.Cut.Raw)
			}
		}
		for l := range strings.SplitAfterSeq(text, "\n") {
			if !strings.HasPrefix(l, textCutPrefix) {
				want.WriteString(l)
			}
		}
		if kept.String() != want.String() {
			t.Fatalf("split %q kept %q, want %q", text, kept.String(), want.String())
		}
		if c := jsonlCut([]byte(line)); c != nil && !strings.HasPrefix(strings.TrimSpace(line), jsonlCutKey) {
			t.Fatalf("%q read as a marker", line)
		}
	})
}
