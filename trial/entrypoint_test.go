package trial

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// writeTask writes a task of the given files into a folder of the test's;
// files ending in .sh are executable.
func writeTask(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// entrypointTask is a task as Harbor's cookbook makes one (dns-blacklisting):
// the image's ENTRYPOINT writes a configuration, starts a daemon, then
// runs the command it was given; the verifier needs both. The daemon
// runs as root, the image's user: the environment's, not an agent's.
func entrypointTask(t *testing.T) string {
	return writeTask(t, map[string]string{
		"task.toml":      "version = \"1.0\"\n[agent]\ntimeout_sec = 120.0\n[verifier]\ntimeout_sec = 60.0\n[environment]\nallow_internet = false\n",
		"instruction.md": "Create /app/hello.txt containing Hello, world!\n",
		"environment/Dockerfile": "FROM busybox\nCOPY entrypoint.sh /entrypoint.sh\n" +
			"ENTRYPOINT [\"/entrypoint.sh\"]\nWORKDIR /app\n",
		"environment/entrypoint.sh": "#!/bin/sh\nset -e\necho configured-by-entrypoint > /etc/entrypoint.conf\n" +
			"mkdir -p /srv/www && echo served-by-entrypoint > /srv/www/index.html\n" +
			"httpd -p 127.0.0.1:8088 -h /srv/www\necho \"entrypoint: running $*\"\nexec \"$@\"\n",
		"solution/solve.sh": "printf 'Hello, world!\\n' > /app/hello.txt\n",
		"tests/test.sh": "#!/bin/sh\nok=1\n" +
			"[ \"$(cat /etc/entrypoint.conf)\" = configured-by-entrypoint ] || { echo 'no configuration'; ok=0; }\n" +
			"[ \"$(wget -qO- http://127.0.0.1:8088/)\" = served-by-entrypoint ] || { echo 'no daemon'; ok=0; }\n" +
			"echo $ok > /logs/verifier/reward.txt\n",
	})
}

// TestImageEntrypointRunsAsHarborRunsIt: the image's ENTRYPOINT runs with
// Harbor's command (sh -c "sleep infinity") under troupe init, and what
// it configured and started is there for the verifier, whether the
// agents run isolated (their uids tell them apart), as root (the
// processes before them are spared), or as the oracle.
func TestImageEntrypointRunsAsHarborRunsIt(t *testing.T) {
	env := testEnv(t)
	dir := entrypointTask(t)
	for _, c := range []struct {
		name string
		run  func() (*trialdir.TrialResult, string)
	}{
		{"isolated", func() (*trialdir.TrialResult, string) {
			return runTrial(t, env, "../examples/manifests/solo.yaml", dir)
		}},
		{"root", func() (*trialdir.TrialResult, string) { return runTrial(t, env, "testdata/manifests/root.yaml", dir) }},
		{"oracle", func() (*trialdir.TrialResult, string) { return runOracle(t, env, dir) }},
	} {
		res, tdir := c.run()
		if res.Outcome != outcome.Passed {
			out, _ := os.ReadFile(filepath.Join(tdir, "verifier", "test-stdout.txt"))
			t.Errorf("%s: %s %+v; the verifier said:\n%s", c.name, res.Outcome, res.ExceptionInfo, out)
		}
		if e := res.Entrypoint; e == nil || e.PID == 0 || e.Exited || strings.Join(e.Cmd, " ") != "/entrypoint.sh sh -c sleep infinity" {
			t.Errorf("%s: the entrypoint's record: %+v", c.name, e)
		}
		if log, _ := os.ReadFile(filepath.Join(tdir, trialdir.EntrypointLog)); !strings.Contains(string(log), "entrypoint: running sh -c sleep infinity") {
			t.Errorf("%s: entrypoint.log: %q", c.name, log)
		}
		if res.Sweep == nil || res.Sweep.Spared == 0 {
			t.Errorf("%s: the sweep spared nothing of the environment: %+v", c.name, res.Sweep)
		}
	}
}

// TestEntrypointThatExitsIsRecorded: an entrypoint that ends early with an
// error is on the record, and the trial goes on; it ran as the image's
// user, in its working folder.
func TestEntrypointThatExitsIsRecorded(t *testing.T) {
	env := testEnv(t)
	dir := writeTask(t, map[string]string{
		"task.toml":                 "version = \"1.0\"\n[environment]\nallow_internet = false\n",
		"instruction.md":            "Nothing to do.\n",
		"environment/Dockerfile":    "FROM busybox\nCOPY entrypoint.sh /entrypoint.sh\nRUN mkdir -p /srv/work && chown 1234 /srv/work\nUSER 1234\nWORKDIR /srv/work\nENTRYPOINT [\"/entrypoint.sh\"]\n",
		"environment/entrypoint.sh": "#!/bin/sh\necho \"$(id -u) $(pwd)\" > /srv/work/who\necho 'giving up' >&2\nexit 3\n",
		"solution/solve.sh":         "true\n",
		"tests/test.sh":             "#!/bin/sh\ncat /srv/work/who\n[ \"$(cat /srv/work/who)\" = '1234 /srv/work' ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
	})
	res, tdir := runOracle(t, env, dir)
	if res.Outcome != outcome.Passed {
		out, _ := os.ReadFile(filepath.Join(tdir, "verifier", "test-stdout.txt"))
		t.Errorf("%s %+v; the verifier said:\n%s", res.Outcome, res.ExceptionInfo, out)
	}
	if e := res.Entrypoint; e == nil || !e.Exited || e.ExitCode == nil || *e.ExitCode != 3 || e.User != "1234" {
		t.Errorf("the entrypoint's record: %+v", e)
	}
	if log, _ := os.ReadFile(filepath.Join(tdir, trialdir.EntrypointLog)); !strings.Contains(string(log), "giving up") {
		t.Errorf("entrypoint.log: %q", log)
	}
	if log, _ := os.ReadFile(filepath.Join(tdir, trialdir.Log)); !strings.Contains(string(log), "the image's entrypoint exited") {
		t.Error("trial.log does not say the entrypoint exited")
	}
}
