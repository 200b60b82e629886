//go:build linux

package inside

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupebench/troupe/runtime"
)

// TestSweepRefusesOutsideATrialContainer: on a host, kill(-1) would end
// every process the user may signal.
func TestSweepRefusesOutsideATrialContainer(t *testing.T) {
	if _, err := Sweep(t.Context(), SweepSpec{Grace: time.Millisecond}); !errors.Is(err, ErrNotInTrialContainer) {
		t.Fatalf("a sweep outside a trial container returned %v", err)
	}
}

// buildEscaper builds testdata/escaper, a program that tries to outlive a
// sweep, with troupe's own static build's flags (staticbin.Build), so
// that the standard library compiled for one serves both.
func buildEscaper(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "escaper")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./testdata/escaper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the escaper: %v\n%s", err, b)
	}
	return out
}

// TestLiveCountsAProcessWhoseMainThreadExited: /proc shows it as a zombie,
// but its other threads run; a listing that skips zombies misses it.
func TestLiveCountsAProcessWhoseMainThreadExited(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	esc := exec.Command(buildEscaper(t), "thread", src, dst)
	if err := esc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		esc.Process.Kill()
		esc.Wait()
	})
	// Its main thread exits after 50 ms; then its other threads still act.
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(esc.Process.Pid), "stat"))
		if state, ok := statState(stat); ok && state == 'Z' || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	os.WriteFile(src, []byte("the answer"), 0o644)
	for time.Now().Before(deadline) {
		if data, _ := os.ReadFile(dst); string(data) == "the answer" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if data, _ := os.ReadFile(dst); string(data) != "the answer" {
		t.Fatal("the escaper did not act after its main thread exited; the test proves nothing")
	}
	procs, err := live(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(procs, func(p Proc) bool { return p.PID == esc.Process.Pid })
	if i < 0 {
		t.Fatalf("live does not list the escaper (pid %d), whose main thread exited and whose other threads run", esc.Process.Pid)
	}
	if !strings.Contains(procs[i].Note, "main thread exited") {
		t.Errorf("its note is %q", procs[i].Note)
	}
}

func TestStatState(t *testing.T) {
	for stat, want := range map[string]byte{
		"12 (sleep) S 1 12 12":            'S',
		"13 (a) b) Z 1":                   'Z',
		"14 (with ) paren) R 1 2 3 4 5 6": 'R',
	} {
		if got, ok := statState([]byte(stat)); !ok || got != want {
			t.Errorf("%q: %c %v, want %c", stat, got, ok, want)
		}
	}
	if _, ok := statState([]byte("15 (broken")); ok {
		t.Error("a stat line without the closing parenthesis was read")
	}
}

func TestIsTroupe(t *testing.T) {
	for cmd, want := range map[string]bool{
		"/opt/troupe/bin/troupe tunnel --listen x=y": true,
		"troupe tunnel":                true,
		"/opt/troupe/bin/troupe agent": false,
		"sh -c troupe tunnel":          false,
		"":                             false,
	} {
		if got := IsTroupe(Proc{Cmd: cmd}, "tunnel"); got != want {
			t.Errorf("%q: %v", cmd, got)
		}
	}
}

func TestShare(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("changing a file's group to another needs root")
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "app")
	os.MkdirAll(filepath.Join(work, "src"), 0o755)
	os.WriteFile(filepath.Join(work, "src", "main.sh"), []byte("echo"), 0o755)
	os.WriteFile(filepath.Join(work, "data.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "outside.txt"), []byte("x"), 0o600)
	os.Symlink(filepath.Join(dir, "outside.txt"), filepath.Join(work, "link"))
	if err := Share(work, 12345); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode fs.FileMode
	}{
		{"", fs.ModeDir | fs.ModeSetgid | 0o775},
		{"src", fs.ModeDir | fs.ModeSetgid | 0o775},
		{"src/main.sh", 0o775},
		{"data.txt", 0o664},
	} {
		info, err := os.Lstat(filepath.Join(work, c.path))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != c.mode || info.Sys().(*syscall.Stat_t).Gid != 12345 {
			t.Errorf("%s: mode %v gid %d; want %v gid 12345", c.path, info.Mode(), info.Sys().(*syscall.Stat_t).Gid, c.mode)
		}
	}
	// The link's target, outside the folder, is untouched.
	if info, _ := os.Stat(filepath.Join(dir, "outside.txt")); info.Mode() != 0o600 || info.Sys().(*syscall.Stat_t).Gid == 12345 {
		t.Errorf("a symlink was followed: %v", info.Mode())
	}
	// A missing folder is created.
	if err := Share(filepath.Join(dir, "new", "work"), 12345); err != nil {
		t.Fatal(err)
	}
}

func TestUnpack(t *testing.T) {
	root := t.TempDir()
	var buf bytes.Buffer
	uid := os.Getuid()
	files := []runtime.File{
		{Path: "/run/troupe/agents/a", Mode: fs.ModeDir | 0o500, UID: uid, GID: uid},
		{Path: "/run/troupe/agents/a/key", Data: []byte("secret\n"), Mode: 0o400, UID: uid, GID: uid},
		{Path: "/logs/artifacts", Mode: fs.ModeDir | fs.ModeSetgid | 0o775},
	}
	if err := runtime.WriteTar(&buf, files); err != nil {
		t.Fatal(err)
	}
	if err := Unpack(&buf, root); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode fs.FileMode
	}{
		{"run/troupe", fs.ModeDir | 0o755},
		{"run/troupe/agents/a", fs.ModeDir | 0o500},
		{"run/troupe/agents/a/key", 0o400},
		{"logs/artifacts", fs.ModeDir | fs.ModeSetgid | 0o775},
	} {
		info, err := os.Lstat(filepath.Join(root, c.path))
		if err != nil || info.Mode() != c.mode {
			t.Errorf("%s: %v %v; want %v", c.path, info.Mode(), err, c.mode)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(root, "run/troupe/agents/a/key")); string(data) != "secret\n" {
		t.Errorf("key holds %q", data)
	}
	// Names that leave the root, and links, are refused.
	for _, h := range []*tar.Header{
		{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "run/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
	} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(h)
		tw.Close()
		if err := Unpack(&b, root); err == nil {
			t.Errorf("%s was unpacked", h.Name)
		}
	}
}

// TestReset: whatever an agent left where the verifier will write or read,
// the folder ends up empty, real and the verifier's, and the record says
// what was there.
func TestReset(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving a folder to another owner needs root")
	}
	for _, c := range []struct {
		name   string
		plant  func(root string)
		listed []string
	}{
		{"absent", func(string) {}, nil},
		{"a reward written in advance", func(root string) {
			os.MkdirAll(filepath.Join(root, "logs/verifier"), 0o777)
			os.WriteFile(filepath.Join(root, "logs/verifier/reward.txt"), []byte("1\n"), 0o644)
		}, []string{"logs/verifier/reward.txt (2 bytes)"}},
		{"the folder is a link to the agent's", func(root string) {
			os.MkdirAll(filepath.Join(root, "logs"), 0o755)
			os.MkdirAll(filepath.Join(root, "app/fake"), 0o777)
			os.WriteFile(filepath.Join(root, "app/fake/reward.txt"), []byte("1\n"), 0o644)
			os.Symlink(filepath.Join(root, "app/fake"), filepath.Join(root, "logs/verifier"))
		}, []string{"logs/verifier (a link to"}},
		{"the parent is a link", func(root string) {
			os.MkdirAll(filepath.Join(root, "app/fakelogs/verifier"), 0o777)
			os.WriteFile(filepath.Join(root, "app/fakelogs/verifier/reward.txt"), []byte("1\n"), 0o644)
			os.Symlink(filepath.Join(root, "app/fakelogs"), filepath.Join(root, "logs"))
		}, []string{"logs (a link to"}},
		{"a file where the folder goes", func(root string) {
			os.MkdirAll(filepath.Join(root, "logs"), 0o755)
			os.WriteFile(filepath.Join(root, "logs/verifier"), []byte("x"), 0o644)
		}, []string{"logs/verifier (1 bytes)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			c.plant(root)
			dir := filepath.Join(root, "logs/verifier")
			removed, err := Reset(dir, 4321, 4322, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			joined := strings.Join(removed, "\n")
			for _, want := range c.listed {
				if !strings.Contains(joined, filepath.Join(root, want)) {
					t.Errorf("removed %q does not name %s", removed, want)
				}
			}
			if len(c.listed) == 0 && len(removed) != 0 {
				t.Errorf("removed %q from nothing", removed)
			}
			for _, p := range []string{filepath.Join(root, "logs"), dir} {
				if info, err := os.Lstat(p); err != nil || !info.IsDir() {
					t.Fatalf("%s is not a real folder: %v %v", p, info, err)
				}
			}
			entries, _ := os.ReadDir(dir)
			info, _ := os.Lstat(dir)
			st := info.Sys().(*syscall.Stat_t)
			if len(entries) != 0 || st.Uid != 4321 || st.Gid != 4322 || info.Mode().Perm() != 0o755 {
				t.Errorf("after Reset: %d entries, owner %d:%d, mode %v", len(entries), st.Uid, st.Gid, info.Mode())
			}
		})
	}
	if _, err := Reset("relative", 0, 0, 0o755); err == nil {
		t.Error("a relative folder was reset")
	}
}

// TestReportBound: an agent that forked thousands of processes does not make
// a result.json of megabytes.
func TestReportBound(t *testing.T) {
	var rep Report
	for i := range maxReported + 50 {
		rep.Signalled = append(rep.Signalled, Proc{PID: i + 2})
		rep.Survivors = append(rep.Survivors, Proc{PID: i + 2})
	}
	rep.bound()
	if len(rep.Signalled) != maxReported || rep.Unlisted != 50 || len(rep.Survivors) != maxReported {
		t.Errorf("signalled %d, unlisted %d, survivors %d", len(rep.Signalled), rep.Unlisted, len(rep.Survivors))
	}
}

func TestLookupUser(t *testing.T) {
	for spec, want := range map[string]User{
		"":          {Name: "root"},
		"root":      {Name: "root"},
		"0":         {Name: "root"},
		"0:0":       {Name: "root"},
		"4242":      {UID: 4242},
		"4242:4343": {UID: 4242, GID: 4343},
		"root:4343": {Name: "root", GID: 4343},
	} {
		got, err := LookupUser(spec)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v; want %+v", spec, got, err, want)
		}
	}
	for _, bad := range []string{"no-such-user-troupe", "root:no-such-group-troupe"} {
		if _, err := LookupUser(bad); err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
