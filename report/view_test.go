package report

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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

// chromium finds a headless browser, or says why the test cannot run.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TROUPE_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium: bash .ci/test installs it (apt-get install chromium)")
	}
	t.Skip("no chromium here; bash .ci/test installs it and runs this test")
	return ""
}

// TestViewInBrowser opens troupe view's trial page in headless Chromium:
// the page must render the transcript, and a screenshot is kept.
func TestViewInBrowser(t *testing.T) {
	browser := chromium(t)
	srv := httptest.NewServer(&Viewer{Dir: viewFixture})
	t.Cleanup(srv.Close)
	page := srv.URL + "/trial?t=" + url.QueryEscape("job-hello/hello-world__test-worker-done__1")
	run := func(args ...string) []byte {
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		home := t.TempDir()
		cmd := exec.CommandContext(ctx, browser, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--user-data-dir=" + filepath.Join(home, "profile")}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", browser, err, stderr.String())
		}
		return out
	}
	dom := string(run("--dump-dom", page))
	for _, want := range []string{`class="timeline"`, "ignored DONE", "DONE: the worker wrote /app/hello.txt.", "worker-1 (implementer)"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	dir := os.Getenv("TROUPE_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	shot, _ := filepath.Abs(filepath.Join(dir, "troupe-view-trial.png"))
	os.MkdirAll(filepath.Dir(shot), 0o755)
	run("--screenshot="+shot, "--window-size=1280,1600", "--hide-scrollbars", page)
	info, err := os.Stat(shot)
	if err != nil || info.Size() < 10_000 {
		t.Fatalf("no screenshot: %v", err)
	}
	png, _ := os.ReadFile(shot)
	if string(png[1:4]) != "PNG" {
		t.Fatalf("%s is not a PNG", shot)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, info.Size())
}
