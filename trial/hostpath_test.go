package trial

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
)

// hostDir makes the folder testdata/tasks/host-path binds:
// main/secret.txt for the trial container, served/page.txt for its sidecar.
func hostDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"main/secret.txt": "read-from-the-host\n", "served/page.txt": "served-from-the-host\n"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestHostPathMounted: a compose task whose main service and sidecar each
// bind a host folder runs when the user allows the folder: the verifier
// reads the main service's file and what the sidecar serves of its own;
// neither the oracle (the agents' side) nor the verifier can write there,
// the allowance being read-only. Without the allowance the trial is
// refused before any container (a job refuses it earlier still: see
// cmd/troupe's TestHostPathPreflight); the path came from the host
// (${TROUPE_TEST_HOST_DIR}), so the result shows it scrubbed.
func TestHostPathMounted(t *testing.T) {
	dir := hostDir(t)
	t.Setenv("TROUPE_TEST_HOST_DIR", dir)
	env := testEnv(t)
	var err error
	if env.HostPaths, err = NewHostPaths([]HostPathRule{{Path: dir}}); err != nil {
		t.Fatal(err)
	}
	res, tdir := runOracle(t, env, "testdata/tasks/host-path")
	out, _ := os.ReadFile(filepath.Join(tdir, "verifier", "test-stdout.txt"))
	if res.Outcome != outcome.Passed {
		t.Fatalf("%s %+v:\n%s", res.Outcome, res.ExceptionInfo, out)
	}
	if !strings.Contains(string(out), "wrote=no") {
		t.Errorf("the verifier's output does not say its write failed:\n%s", out)
	}
	agent, _ := os.ReadFile(filepath.Join(tdir, "agents", "oracle", "stdout.log"))
	if !strings.Contains(string(agent), "read-from-the-host") || !strings.Contains(string(agent), "could not write") {
		t.Errorf("the oracle's output:\n%s", agent)
	}
	for _, f := range []string{"main/by-agent.txt", "main/by-verifier.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was written on the host through a read-only bind", f)
		}
	}

	if left, err := testRT.List(t.Context(), map[string]string{runtime.LabelJob: env.JobID}); err != nil || len(left) != 0 {
		t.Errorf("left behind: %v %v", left, err)
	}

	env.HostPaths = HostPaths{}
	res, _ = runOracle(t, env, "testdata/tasks/host-path")
	if res.Outcome != outcome.UnscoredInfra || res.ExceptionInfo == nil || !strings.Contains(res.ExceptionInfo.ExceptionMessage, "task host-path: service main binds host path ") || !strings.Contains(res.ExceptionInfo.ExceptionMessage, "/main (at /mnt/host): not allowed: allow it with troupe run --allow-host-path") {
		t.Errorf("without the allowance: %s %+v", res.Outcome, res.ExceptionInfo)
	}
}

// TestHostPathsAllow: which binds a set of allowed paths mounts, and how;
// every refusal names the task, the service, the path and what allows it.
func TestHostPathsAllow(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"allowed/sub", "allowed/rw", "other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A link inside the allowed folder that leads out of it.
	if err := os.Symlink(filepath.Join(root, "other"), filepath.Join(root, "allowed", "out")); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(root, "allowed", "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h, err := NewHostPaths([]HostPathRule{{Path: filepath.Join(root, "allowed")}, {Path: filepath.Join(root, "allowed", "rw"), Write: true}})
	if err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(root, "allowed")
	for _, c := range []struct {
		name    string
		mount   task.HostMount
		want    *HostBind
		refused string
	}{
		{name: "the allowed folder, read-only", mount: task.HostMount{Service: "main", Source: a, Target: "/x"}, want: &HostBind{Host: a}},
		{name: "under it", mount: task.HostMount{Service: "side", Source: a + "/sub", Target: "/x"}, want: &HostBind{Host: a + "/sub"}},
		{name: "under a rw rule: the most specific rule decides", mount: task.HostMount{Service: "main", Source: a + "/rw", Target: "/x"}, want: &HostBind{Host: a + "/rw", Write: true}},
		{name: "the compose file's own :ro wins", mount: task.HostMount{Service: "main", Source: a + "/rw", Target: "/x", ReadOnly: true}, want: &HostBind{Host: a + "/rw"}},
		{name: "not allowed", mount: task.HostMount{Service: "side", Source: root + "/other", Target: "/x"},
			refused: "task t: service side binds host path " + root + "/other (at /x): not allowed: allow it with troupe run --allow-host-path " + root + "/other (read-only; add :rw to let it write) or allow_host_paths in the config file"},
		{name: "a link out of the allowed folder", mount: task.HostMount{Service: "main", Source: a + "/out", Target: "/x"},
			refused: "binds host path " + a + "/out (at /x): not allowed: it leads to " + root + "/other; allow it with troupe run --allow-host-path " + root + "/other"},
		{name: "a socket, even allowed", mount: task.HostMount{Service: "main", Source: sock, Target: "/x"}, refused: "is a socket, not a folder or a file: never mounted"},
		{name: "missing", mount: task.HostMount{Service: "main", Source: a + "/nope", Target: "/x"}, refused: "does not exist on this host (troupe creates no host folder)"},
		{name: "the engine's socket", mount: task.HostMount{Service: "main", Source: "/var/run/docker.sock", Target: "/x"}, refused: "never mounted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk := &task.Task{Name: "t", Compose: &task.Compose{Main: task.Service{Name: "main"}}}
			if c.mount.Service == "main" {
				tk.Compose.Main.HostMounts = []task.HostMount{c.mount}
			} else {
				tk.Compose.Sidecars = []task.Service{{Name: c.mount.Service, HostMounts: []task.HostMount{c.mount}}}
			}
			binds, err := h.Binds(tk)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("want refused with %q, got %v %v", c.refused, binds, err)
				}
				if _, ok := errors.AsType[*HostPathError](err); !ok {
					t.Errorf("not a *HostPathError: %T", err)
				}
				return
			}
			c.want.HostMount = c.mount
			if err != nil || len(binds) != 1 || binds[0] != *c.want {
				t.Fatalf("binds %+v %v, want %+v", binds, err, *c.want)
			}
		})
	}
	for _, c := range []struct{ rule, refused string }{
		{"/", "the host's root is never mounted"},
		{"/proc/self", "never mounted"},
		{"/var/run", "holds the container engine's socket"},
		{filepath.Join(root, "nope"), "does not exist on this host"},
	} {
		if _, err := NewHostPaths([]HostPathRule{{Path: c.rule}}); err == nil || !strings.Contains(err.Error(), c.refused) {
			t.Errorf("rule %s: %v, want %q", c.rule, err, c.refused)
		}
	}
	for in, want := range map[string]HostPathRule{"/a": {Path: "/a"}, "/a:rw": {Path: "/a", Write: true}, "/a:ro": {Path: "/a"}, "/a:b:rw": {Path: "/a:b", Write: true}} {
		if got, err := ParseHostPathRule(in); err != nil || got != want {
			t.Errorf("%q: %+v %v", in, got, err)
		}
	}
	if _, err := ParseHostPathRule(":rw"); err == nil {
		t.Error(":rw parsed")
	}
}

// FuzzParseHostPathRule: any --allow-host-path value is read or refused
// without a panic, and a rule read back from its String is the same.
func FuzzParseHostPathRule(f *testing.F) {
	for _, s := range []string{"/a", "/a:rw", "/a:ro", "/a:rw:ro", ":rw", "", "rel/x:rw"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseHostPathRule(s)
		if err != nil {
			return
		}
		if back, err := ParseHostPathRule(r.String()); err != nil || back != r {
			t.Errorf("%q read as %+v, written %q, read back as %+v %v", s, r, r.String(), back, err)
		}
	})
}
