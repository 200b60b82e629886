package report

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testdata/view holds a real job of troupe run: the team example and a
// condition whose worker posts DONE: before the lead.
const viewFixture = "testdata/view"

func get(t *testing.T, srv *httptest.Server, path string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func TestViewer(t *testing.T) {
	srv := httptest.NewServer(&Viewer{Dir: viewFixture})
	t.Cleanup(srv.Close)

	code, index, h := get(t, srv, "/")
	if code != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("index: %d %v", code, h)
	}
	for _, want := range []string{"job-hello", "hello-world__test-worker-done__1", "hello-world__hello-team-mock__1", "Comparison", "<svg", "test-worker-done"} {
		if !strings.Contains(index, want) {
			t.Errorf("index lacks %q", want)
		}
	}
	if strings.Contains(index, `http-equiv="refresh"`) {
		t.Error("a finished job's page refreshes itself")
	}

	code, page, _ := get(t, srv, "/trial?t="+url.QueryEscape("job-hello/hello-world__test-worker-done__1"))
	if code != 200 {
		t.Fatalf("trial page: %d %s", code, page)
	}
	for _, want := range []string{
		`<span class="who">worker-1 (implementer)</span><span class="mention">@lead-1 (lead)</span><span class="badge ignored">ignored DONE</span>`,
		`<span class="who">lead-1 (lead)</span><span class="mention">@user</span><span class="badge done">DONE</span>`,
		"Please write /app/hello.txt", "hello.txt is correct", "<h3>worker-1", `"msg":"turn start"`,
	} {
		if !strings.Contains(page, strings.ReplaceAll(want, `"`, "&#34;")) && !strings.Contains(page, want) {
			t.Errorf("trial page lacks %s", want)
		}
	}
	if n := strings.Count(page, `<td>200</td>`); n < 4 {
		t.Errorf("%d model calls shown", n)
	}
	for _, p := range []string{"/trial?t=" + url.QueryEscape("../../etc"), "/trial?t=", "/trial?t=job-hello", "/etc/passwd"} {
		if code, _, _ := get(t, srv, p); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, code)
		}
	}
	resp, _ := http.Post(srv.URL+"/", "text/plain", nil)
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
	resp.Body.Close()
	for _, body := range []string{index, page} {
		if m := regexp.MustCompile(`(?i)<script|<link|src=|@import|https?://`).FindString(body); m != "" {
			t.Errorf("a page refers outside itself: %q", m)
		}
	}
}

// A job still running (no finished_at) is shown as running and its pages
// refresh.
func TestViewerRunningJob(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(viewFixture)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "job-hello", "result.json"), []byte(`{"id":"x","n_total_trials":3,"finished_at":null}`), 0o644)
	srv := httptest.NewServer(&Viewer{Dir: dir})
	t.Cleanup(srv.Close)
	_, index, _ := get(t, srv, "/")
	if !strings.Contains(index, `http-equiv="refresh"`) || !strings.Contains(index, "running") {
		t.Error("a running job's page does not refresh")
	}
}

// copyFixture copies the real job, to be changed by a test.
func copyFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(viewFixture)); err != nil {
		t.Fatal(err)
	}
	return dir
}

const doneTrial = "job-hello/hello-world__test-worker-done__1"

func TestViewerRefusesOtherHosts(t *testing.T) {
	srv := httptest.NewServer(&Viewer{Dir: viewFixture, Hosts: []string{"box.lan"}})
	t.Cleanup(srv.Close)
	tests := []struct {
		host string
		want int
	}{
		{"", 200}, // httptest's 127.0.0.1:port
		{"localhost:7480", 200},
		{"[::1]:7480", 200},
		{"box.lan:7480", 200},
		{"evil.example:7480", 403},
		{"127.0.0.1.evil.example", 403},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
		if tt.host != "" {
			req.Host = tt.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Host %q: %d, want %d", tt.host, resp.StatusCode, tt.want)
		}
	}
}

// What a hand-made or hostile trial folder holds must not take the viewer
// outside DIR, block it, or fill its memory.
func TestViewerReadsOnlyRegularFilesInside(t *testing.T) {
	dir := copyFixture(t)
	trial := filepath.Join(dir, filepath.FromSlash(doneTrial))
	secret := filepath.Join(t.TempDir(), "secret")
	os.MkdirAll(secret, 0o755)
	os.WriteFile(filepath.Join(secret, "stderr.log"), []byte("SECRET-OUTSIDE"), 0o644)
	// A link to a file outside, a FIFO, and an agent id that climbs out.
	os.Remove(filepath.Join(trial, "verifier", "test-stdout.txt"))
	if err := os.Symlink(filepath.Join(secret, "stderr.log"), filepath.Join(trial, "verifier", "test-stdout.txt")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(trial, "agents", "lead-1", "stderr.log"))
	if err := syscall.Mkfifo(filepath.Join(trial, "agents", "lead-1", "stderr.log"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ := os.ReadFile(filepath.Join(trial, "result.json"))
	climb, _ := filepath.Rel(filepath.Join(trial, "agents"), secret)
	res = bytes.Replace(res, []byte(`"id": "worker-1"`), []byte(`"id": "`+climb+`"`), 1)
	os.WriteFile(filepath.Join(trial, "result.json"), res, 0o644)
	// A transcript line over the line limit, before the DONE: messages.
	tr := filepath.Join(trial, "relay", "transcript.jsonl")
	lines, _ := os.ReadFile(tr)
	long := `{"seq":0,"event":{"kind":9,"content":"` + strings.Repeat("x", maxLineBytes) + `"}}` + "\n"
	os.WriteFile(tr, append([]byte(long), lines...), 0o644)
	// What a verifier could leave in /logs must not pose as a trial.
	os.MkdirAll(filepath.Join(trial, "planted"), 0o755)
	os.WriteFile(filepath.Join(trial, "planted", "result.json"), []byte(`{"trial_name":"planted","task_name":"x","condition":"y","outcome":"passed"}`), 0o644)

	srv := httptest.NewServer(&Viewer{Dir: dir})
	t.Cleanup(srv.Close)
	done := make(chan struct{})
	var code int
	var page string
	go func() {
		defer close(done)
		code, page, _ = get(t, srv, "/trial?t="+url.QueryEscape(doneTrial))
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the trial page hangs on a FIFO")
	}
	if code != 200 {
		t.Fatalf("trial page: %d %s", code, page)
	}
	if strings.Contains(page, "SECRET-OUTSIDE") {
		t.Error("the page shows a file outside DIR")
	}
	for _, want := range []string{"is not a regular file", "an agent id that is not a folder name", "1 lines of relay/transcript.jsonl over 4 MiB are left out", "ignored DONE", `<span class="badge done">DONE</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("trial page lacks %q", want)
		}
	}
	_, index, _ := get(t, srv, "/")
	if strings.Contains(index, "planted") {
		t.Error("a result.json inside a trial folder is listed as a trial")
	}
}

// A job that has started: one trial running (config.json, a transcript
// being written, no result.json), no trial finished yet.
func TestViewerShowsRunningTrials(t *testing.T) {
	dir := copyFixture(t)
	job := filepath.Join(dir, "job-hello")
	for _, name := range []string{"hello-world__hello-team-mock__1", "hello-world__test-worker-done__1"} {
		os.RemoveAll(filepath.Join(job, name))
	}
	os.WriteFile(filepath.Join(job, "result.json"), []byte(`{"id":"x","n_total_trials":1,"finished_at":null}`), 0o644)
	live := filepath.Join(job, "fix-it__team__1")
	os.MkdirAll(filepath.Join(live, "relay"), 0o755)
	os.MkdirAll(filepath.Join(live, "agents", "lead-1"), 0o755)
	os.WriteFile(filepath.Join(live, "config.json"), []byte(`{"task":{"path":"/tasks/fix-it"},"trial_name":"fix-it__team__1","task_name":"fix-it","task_checksum":"c","attempt":1,"condition":"team","manifest_sha256":"abc"}`), 0o644)
	user, lead := strings.Repeat("1", 64), strings.Repeat("2", 64)
	os.WriteFile(filepath.Join(live, "relay", "members.json"), []byte(`[{"id":"user","role":"user","kind":"user","pubkey":"`+user+`"},{"id":"lead-1","role":"lead","kind":"orchestrator","pubkey":"`+lead+`"}]`), 0o644)
	os.WriteFile(filepath.Join(live, "relay", "transcript.jsonl"), []byte(
		`{"seq":1,"event":{"kind":9,"pubkey":"`+user+`","tags":[["p","`+lead+`"]],"content":"Fix it."}}`+"\n"+
			`{"seq":2,"event":{"kind":9,"pubkey":"`+lead+`","tags":[["p","`+user+`"]],"content":"DONE: fixed"}}`+"\n"+
			`{"seq":3,"event":{"kind":9,"pubkey":"`), 0o644) // a line being written
	os.WriteFile(filepath.Join(live, "agents", "lead-1", "llm-calls.jsonl"), []byte(`{"time":"2026-11-30T10:00:00Z","status":200,"input_tokens":7,"output_tokens":3,"cost_usd":0.5}`+"\n"), 0o644)

	srv := httptest.NewServer(&Viewer{Dir: dir})
	t.Cleanup(srv.Close)
	code, index, _ := get(t, srv, "/")
	if code != 200 || !strings.Contains(index, `http-equiv="refresh"`) || !strings.Contains(index, `<span class="outcome running">running</span>`) || !strings.Contains(index, "fix-it__team__1") {
		t.Fatalf("index of a job with a running trial: %d\n%s", code, index)
	}
	code, page, _ := get(t, srv, "/trial?t="+url.QueryEscape("job-hello/fix-it__team__1"))
	if code != 200 {
		t.Fatalf("running trial page: %d %s", code, page)
	}
	for _, want := range []string{`http-equiv="refresh"`, "This trial is running", `<span class="who">user</span><span class="mention">@lead-1 (lead)</span>`, "DONE: fixed", "<td>1 calls</td>", "<td>7</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("running trial page lacks %q", want)
		}
	}
	if strings.Contains(page, "ignored DONE") {
		t.Error("a running trial's DONE: is called ignored before the trial ends")
	}
}

// TestViewerShowsAReplay: a replay's trial page says what it replayed, each
// agent's calls, and each divergence with its diff.
func TestViewerShowsAReplay(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(viewFixture)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "job-hello", "hello-world__test-worker-done__1", "result.json")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	replay := `"replay": {"source": "jobs/job-1/hello-world__test-worker-done__1", "recorded_outcome": "passed", "on_divergence": "stop",
  "agents": [{"id": "lead-1", "calls_recorded": 4, "calls_replayed": 2, "calls_live": 0, "calls_refused": 0, "live_cost_usd": 0},
             {"id": "worker-1", "calls_recorded": 3, "calls_replayed": 0, "calls_live": 0, "calls_refused": 1, "live_cost_usd": 0}],
  "divergences": [{"agent": "worker-1", "call": 1, "time": "2026-12-01T14:00:00Z", "why": "the request differs from the recorded one", "diff": "--- recorded\n+++ replay\n+    Always say <please>.\n"}]},`
	data = bytes.Replace(data, []byte("{"), []byte("{"+replay), 1)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&Viewer{Dir: dir})
	t.Cleanup(srv.Close)
	code, page, _ := get(t, srv, "/trial?t="+url.QueryEscape("job-hello/hello-world__test-worker-done__1"))
	if code != 200 {
		t.Fatalf("trial page: %d %s", code, page)
	}
	for _, want := range []string{
		"<dt>replay of</dt><dd>jobs/job-1/hello-world__test-worker-done__1 (recorded: passed; on divergence: stop)</dd>",
		"<tr><td>lead-1</td><td>4</td><td>2</td><td>0</td><td>0</td>",
		"worker-1, call 1: the request differs from the recorded one",
		"Always say &lt;please&gt;.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}
