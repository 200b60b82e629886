package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// noControls fails the test when text holds anything a terminal would obey
// rather than show: a control character but newline and tab, a
// bidirectional control, or a byte that is not UTF-8.
func noControls(t *testing.T, what, text string) {
	t.Helper()
	if !utf8.ValidString(text) {
		t.Errorf("%s is not UTF-8:\n%q", what, text)
	}
	for i, r := range text {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			t.Errorf("%s holds %U at byte %d, which a terminal obeys:\n%q", what, r, i, text)
			return
		}
	}
}

// hostileOutput is what the attacks print: a window title (OSC … BEL), a
// clear screen and a colour (CSI), DEL, C1 CSI in UTF-8, a bidi override
// and a byte that is not UTF-8.
const hostileOutput = `printf 'fetching \033]0;pwned\007\033[2J\033[31mred\177 \302\2332J \342\200\256fdp.exe \377 done\n'`

// TestInstallOutputReachesTheTerminalEscaped: a stack's install script
// prints control sequences and fails. troupe run's lines quote its last
// words: every control character is shown escaped, none reaches the
// terminal. With --json the events on standard output are protocol, kept
// raw: valid JSON whose error holds the very bytes the script printed.
func TestInstallOutputReachesTheTerminalEscaped(t *testing.T) {
	manifestSrc, hello := repoPath(t, "trial/testdata/manifests/install.yaml"), repoPath(t, "examples/tasks/hello-world")
	dir := isolate(t)
	script := "#!/bin/sh\n" + hostileOutput + "\nexit 1\n"
	write(t, filepath.Join(dir, "bin", "install.sh"), script)
	write(t, filepath.Join(dir, "stacks.yaml"), "stacks:\n  hostile:\n    command: [/usr/local/bin/hostile-agent]\n    install: {path: bin/install.sh, sha256: "+digest([]byte(script))+"}\n    install_timeout_sec: 60\n")
	m, err := os.ReadFile(manifestSrc)
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "hostile.yaml")
	write(t, manifest, strings.Replace(string(m), "harness: installed", "harness: hostile", 1))
	job := filepath.Join(dir, "job")
	args := []string{"run", manifest, "--tasks", hello, "--retries", "0", "--out", job}

	code, stdout, stderr := troupe(t, args...)
	if code != exitUnmeasured {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	noControls(t, "standard output", stdout)
	noControls(t, "standard error", stderr)
	want := `    fetching \u001b]0;pwned\u0007\u001b[2J\u001b[31mred\u007f \u009b2J \u202efdp.exe \xff done`
	if !strings.Contains(stderr, want) {
		t.Errorf("standard error does not show the script's last words escaped, %s:\n%s", want, stderr)
	}

	// The same command runs the unmeasured trial again, now with --json.
	code, stdout, stderr = troupe(t, append(args, "--json")...)
	if code != exitUnmeasured {
		t.Fatalf("--json: exit %d\n%s\n%s", code, stdout, stderr)
	}
	raw := "fetching \x1b]0;pwned\x07\x1b[2J\x1b[31mred\x7f \u009b2J \u202efdp.exe \ufffd done"
	found := false
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var e struct{ Type, Error string }
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("--json printed a line that is not JSON: %v\n%q", err, sc.Text())
		}
		found = found || e.Type == "trial_finished" && strings.Contains(e.Error, raw)
	}
	if !found {
		t.Errorf("no trial_finished event holds the script's words as it printed them (%q):\n%s", raw, stdout)
	}
	if !strings.Contains(stdout, "\x7f") {
		t.Errorf("--json's events were escaped, not kept raw:\n%q", stdout)
	}
}

// TestTaskNamesReachTheTerminalEscaped: a dataset's task folder and an
// unknown key of its task.toml carry control sequences; tasks load shows
// them escaped, and its --json keeps them as they are.
func TestTaskNamesReachTheTerminalEscaped(t *testing.T) {
	dir := isolate(t)
	name := "fix\x1b]0;pwned\x07\x1b[2J"
	files := map[string]string{}
	harborTask(files, filepath.Join(dir, "ds", name))
	for path, body := range files {
		write(t, path, body)
	}
	toml := filepath.Join(dir, "ds", name, "task.toml")
	data, err := os.ReadFile(toml)
	if err != nil {
		t.Fatal(err)
	}
	write(t, toml, string(data)+"\"k\\u001b[2J\" = 1\n")

	code, stdout, stderr := troupe(t, "tasks", "load", filepath.Join(dir, "ds"))
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	noControls(t, "tasks load", stdout+stderr)
	// The loader quotes a key itself (%q).
	for _, want := range []string{`fix\u001b]0;pwned\u0007\u001b[2J`, `unknown key "k\x1b[2J"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("tasks load does not show %s:\n%s", want, stdout)
		}
	}

	code, stdout, _ = troupe(t, "tasks", "load", filepath.Join(dir, "ds"), "--json")
	var r taskReport
	if err := json.Unmarshal([]byte(stdout), &r); code != exitOK || err != nil || r.Task != name {
		t.Errorf("--json: exit %d, %v, task %q:\n%s", code, err, r.Task, stdout)
	}
}
