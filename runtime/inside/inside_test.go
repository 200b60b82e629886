//go:build linux

package inside

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/troupebench/troupe/runtime"
)

// TestSweepOwnChildren sweeps only the processes this test starts: a sweep
// that spared nothing would signal everything the test's user may signal.
func TestSweepOwnChildren(t *testing.T) {
	plain := exec.Command("sleep", "300")
	stubborn := exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 1; done`)
	for _, c := range []*exec.Cmd{plain, stubborn} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		go c.Wait() // reap them, as init would
	}
	mine := []int{plain.Process.Pid, stubborn.Process.Pid}
	time.Sleep(100 * time.Millisecond) // let the shell install its trap
	start := time.Now()
	rep, err := Sweep(t.Context(), 500*time.Millisecond, func(p Proc) bool { return !slices.Contains(mine, p.PID) })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Signalled) != 2 || len(rep.Survivors) != 0 {
		t.Fatalf("report %+v", rep)
	}
	for _, p := range rep.Signalled {
		if want := p.PID == stubborn.Process.Pid; p.Kill != want {
			t.Errorf("%+v: killed %v, want %v", p, p.Kill, want)
		}
	}
	if elapsed := time.Since(start); elapsed < 500*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("the sweep took %v with a 500ms grace", elapsed)
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
