package report

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

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

// browserWidth is the window the pages must fit: a laptop's browser.
const browserWidth = 1400

// browser runs headless Chromium on one page.
type browser struct {
	t         *testing.T
	path      string
	artifacts string
}

func newBrowser(t *testing.T) *browser {
	dir := os.Getenv("TROUPE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts") // the repository's, as .ci/test sets it (git ignores it)
	}
	dir, _ = filepath.Abs(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, path: chromium(t), artifacts: dir}
}

func (b *browser) run(height int, args ...string) []byte {
	t := b.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, b.path, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + filepath.Join(home, "profile"), "--hide-scrollbars",
		"--window-size=" + itoa(browserWidth) + "," + itoa(height)}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", b.path, err, stderr.String())
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

// dom is the page as the browser built it.
func (b *browser) dom(page string, height int) string {
	return string(b.run(height, "--dump-dom", page))
}

// screenshot keeps a picture of the page in the artifacts folder.
func (b *browser) screenshot(page, name string, height int) {
	t := b.t
	t.Helper()
	shot := filepath.Join(b.artifacts, name)
	b.run(height, "--screenshot="+shot, page)
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 10_000 || string(png[1:4]) != "PNG" {
		t.Fatalf("no screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
}

// layoutProbe, put at the end of a copy of a page, measures what a reader
// sees at the window's width: whether the page or one of its tables needs
// a horizontal scroll, and every chart label that leaves its chart.
const layoutProbe = `<script>
(function () {
  var r = {innerWidth: window.innerWidth, scrollWidth: document.documentElement.scrollWidth, tables: [], outside: []};
  document.querySelectorAll("table").forEach(function (t) {
    var th = t.querySelector("th");
    r.tables.push({name: th ? th.textContent : "", conditions: t.classList.contains("conditions"),
      right: t.getBoundingClientRect().right, scrollWidth: t.scrollWidth, clientWidth: t.clientWidth});
  });
  document.querySelectorAll("svg").forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    svg.querySelectorAll("text").forEach(function (tx) {
      var b = tx.getBoundingClientRect();
      if (b.left < box.left - 0.5 || b.right > box.right + 0.5 || b.top < box.top - 0.5 || b.bottom > box.bottom + 0.5) {
        r.outside.push(svg.getAttribute("aria-label") + ": " + tx.textContent);
      }
    });
  });
  var pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = JSON.stringify(r);
  document.body.appendChild(pre);
})();
</script>`

type layout struct {
	InnerWidth  float64 `json:"innerWidth"`
	ScrollWidth float64 `json:"scrollWidth"`
	Tables      []struct {
		Name        string  `json:"name"`
		Conditions  bool    `json:"conditions"`
		Right       float64 `json:"right"`
		ScrollWidth float64 `json:"scrollWidth"`
		ClientWidth float64 `json:"clientWidth"`
	} `json:"tables"`
	Outside []string `json:"outside"`
}

// checkLayout loads a copy of the page with the probe (troupe view's pages
// forbid scripts; the copy is a file) and checks that it fits.
func (b *browser) checkLayout(page []byte, height int) {
	t := b.t
	t.Helper()
	file := filepath.Join(t.TempDir(), "page.html")
	probed := bytes.Replace(page, []byte("</body>"), []byte(layoutProbe+"</body>"), 1)
	if err := os.WriteFile(file, probed, 0o644); err != nil {
		t.Fatal(err)
	}
	dom := b.dom("file://"+file, height)
	m := regexp.MustCompile(`(?s)<pre id="layout">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the probe did not run:\n%s", dom)
	}
	var l layout
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &l); err != nil {
		t.Fatal(err)
	}
	if l.InnerWidth != browserWidth || l.ScrollWidth > l.InnerWidth {
		t.Errorf("at %v px the page is %v px wide: it needs a horizontal scroll", l.InnerWidth, l.ScrollWidth)
	}
	// Every table, the conditions table first of all, is whole: no
	// horizontal scroll inside it, no edge past the window.
	if len(l.Tables) == 0 || !l.Tables[0].Conditions {
		t.Error("the first table is not the conditions table")
	}
	for i, tb := range l.Tables {
		if tb.Right > l.InnerWidth || tb.ScrollWidth > tb.ClientWidth {
			t.Errorf("table %d (%q…) is cut at %v px: right edge %v, %v px of content in %v", i, tb.Name, l.InnerWidth, tb.Right, tb.ScrollWidth, tb.ClientWidth)
		}
	}
	for _, o := range l.Outside {
		t.Errorf("a chart label leaves its chart: %s", o)
	}
}

func fetch(t *testing.T, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", u, resp.StatusCode, body)
	}
	return body
}

// TestViewInBrowser opens troupe view's pages and the HTML report in
// headless Chromium at 1,400 px, checks what a reader sees, and keeps a
// screenshot of each view in the artifacts folder ($TROUPE_TEST_ARTIFACTS,
// default the repository's artifacts/).
func TestViewInBrowser(t *testing.T) {
	b := newBrowser(t)

	t.Run("trial", func(t *testing.T) {
		b := &browser{t: t, path: b.path, artifacts: b.artifacts}
		srv := httptest.NewServer(&Viewer{Dir: viewFixture})
		t.Cleanup(srv.Close)
		page := srv.URL + "/trial?t=" + url.QueryEscape(doneTrial)
		dom := b.dom(page, 1600)
		for _, want := range []string{`class="timeline"`, "ignored DONE", "DONE: the worker wrote /app/hello.txt.", "worker-1 (implementer)"} {
			if !strings.Contains(dom, want) {
				t.Errorf("the rendered page lacks %q", want)
			}
		}
		b.screenshot(page, "troupe-view-trial.png", 1600)
	})

	// Point 5: the baseline is chosen in the URL, the comparison is first.
	t.Run("index with a chosen baseline", func(t *testing.T) {
		b := &browser{t: t, path: b.path, artifacts: b.artifacts}
		srv := httptest.NewServer(&Viewer{Dir: viewFixture})
		t.Cleanup(srv.Close)
		page := srv.URL + "/?baseline=test-worker-done"
		dom := b.dom(page, 1400)
		for _, want := range []string{"<h2>Against test-worker-done</h2>", "<strong>test-worker-done</strong>", `href="/?baseline=hello-team-mock#comparison"`, "baseline=test-worker-done"} {
			if !strings.Contains(dom, want) {
				t.Errorf("the rendered index lacks %q", want)
			}
		}
		if strings.Index(dom, `id="comparison"`) > strings.Index(dom, `id="trials"`) {
			t.Error("the comparison is not first")
		}
		b.checkLayout(fetch(t, page), 1400)
		b.screenshot(page, "troupe-view-index-baseline.png", 2000)
	})

	// Point 6: a missing call log is said, and the total agrees.
	t.Run("trial with a missing call log", func(t *testing.T) {
		b := &browser{t: t, path: b.path, artifacts: b.artifacts}
		dir := copyFixture(t)
		os.Remove(filepath.Join(dir, filepath.FromSlash(doneTrial), "agents", "worker-1", "llm-calls.jsonl"))
		srv := httptest.NewServer(&Viewer{Dir: dir})
		t.Cleanup(srv.Close)
		page := srv.URL + "/trial?t=" + url.QueryEscape(doneTrial)
		dom := b.dom(page, 1600)
		if !strings.Contains(dom, "the call log agents/worker-1/llm-calls.jsonl is missing; the result records 3 calls") || strings.Contains(dom, ">no calls<") {
			t.Error("the rendered page does not say the call log is missing")
		}
		b.screenshot(page, "troupe-view-missing-call-log.png", 1600)
	})

	// Point 9: what troupe cut when writing is a visible notice.
	t.Run("trial with cut files", func(t *testing.T) {
		b := &browser{t: t, path: b.path, artifacts: b.artifacts}
		srv := httptest.NewServer(&Viewer{Dir: cutFixture})
		t.Cleanup(srv.Close)
		page := srv.URL + "/trial?t=" + url.QueryEscape(cutTrial)
		dom := b.dom(page, 1600)
		for _, want := range []string{"81234 bytes (57 lines) dropped here", "23456 bytes (40 lines) dropped here", "55555 bytes (444 lines) dropped here"} {
			if !strings.Contains(dom, want) {
				t.Errorf("the rendered page lacks %q", want)
			}
		}
		b.screenshot(page, "troupe-view-cut-files.png", 1600)
	})

	// Issue 15: each agent's conversation, call by call.
	t.Run("conversation", func(t *testing.T) {
		b := &browser{t: t, path: b.path, artifacts: b.artifacts}
		srv := httptest.NewServer(&Viewer{Dir: conversationTrial(t)})
		t.Cleanup(srv.Close)
		page := srv.URL + "/conversation?agent=worker-1&t=" + url.QueryEscape(doneTrial)
		dom := b.dom(page, 1600)
		for _, want := range []string{`id="call-3"`, "tool call write_file", "tool result call_1", "thanks, now stop", "bye for now", "4321 in (1000 cached), 77 out", "&lt;script&gt;alert(1)"} {
			if !strings.Contains(dom, want) {
				t.Errorf("the rendered conversation lacks %q", want)
			}
		}
		b.screenshot(page, "troupe-view-conversation.png", 1600)
	})

	// Point 7: the report fits 1,400 px; charts keep their labels inside.
	t.Run("html report", func(t *testing.T) {
		b := &browser{t: t, path: b.path, artifacts: b.artifacts}
		var buf bytes.Buffer
		if err := richComparison(t).Write(&buf, FormatHTML); err != nil {
			t.Fatal(err)
		}
		b.checkLayout(buf.Bytes(), 1400)
		file := filepath.Join(b.artifacts, "troupe-compare-report.html")
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		b.screenshot("file://"+file, "troupe-compare-report.png", 2600)
	})
}
