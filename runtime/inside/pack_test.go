//go:build linux

package inside

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/troupebench/troupe/runtime"
)

// The file type bits Docker's archives keep in a header's mode, beside the
// permissions (S_IFDIR and the like).
const (
	isDir  = 0o40000
	isReg  = 0o100000
	isLink = 0o120000
	isFifo = 0o10000
)

// entry is a tar entry as a test compares it.
type entry struct {
	typ      byte
	mode     int64
	uid, gid int
	link     string
	data     string
}

// readTar reads a tar stream into its entries by name, in order.
func readTar(t *testing.T, r io.Reader) ([]string, map[string]entry) {
	t.Helper()
	tr := tar.NewReader(r)
	var names []string
	entries := map[string]entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, entries
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		entries[h.Name] = entry{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, link: h.Linkname, data: string(data)}
	}
}

func TestPack(t *testing.T) {
	src := filepath.Join(t.TempDir(), "logs", "artifacts")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "sub", "deeper"), 0o755))
	must(os.WriteFile(filepath.Join(src, "a.txt"), []byte("alpha\n"), 0o640))
	must(os.Chmod(filepath.Join(src, "a.txt"), 0o640))
	must(os.WriteFile(filepath.Join(src, "sub", "b.bin"), []byte{0, 1, 2}, 0o755))
	must(os.Chmod(filepath.Join(src, "sub"), 0o750))
	must(os.Chmod(filepath.Join(src, "sub", "b.bin"), os.ModeSetuid|0o755))
	must(os.Symlink("/etc/passwd", filepath.Join(src, "out")))
	must(os.Symlink("../..", filepath.Join(src, "sub", "up")))
	must(os.Symlink(filepath.Join(src, "sub"), filepath.Join(src, "dirlink")))
	must(syscall.Mkfifo(filepath.Join(src, "pipe"), 0o620))
	must(os.Chmod(filepath.Join(src, "pipe"), os.ModeNamedPipe|0o620))
	l, err := net.Listen("unix", filepath.Join(src, "sock"))
	must(err)
	defer l.Close()
	uid, gid := os.Getuid(), os.Getgid()
	owner := uid
	if uid == 0 {
		owner = 4321
		must(os.Lchown(filepath.Join(src, "a.txt"), owner, 4322))
	}

	var buf bytes.Buffer
	must(Pack(&buf, src+"/"))
	names, got := readTar(t, &buf)
	want := map[string]entry{
		"artifacts/":            {typ: tar.TypeDir, mode: isDir | 0o755, uid: uid, gid: gid},
		"artifacts/a.txt":       {typ: tar.TypeReg, mode: isReg | 0o640, uid: owner, gid: map[bool]int{true: 4322, false: gid}[uid == 0], data: "alpha\n"},
		"artifacts/dirlink":     {typ: tar.TypeSymlink, mode: isLink | 0o777, uid: uid, gid: gid, link: filepath.Join(src, "sub")},
		"artifacts/out":         {typ: tar.TypeSymlink, mode: isLink | 0o777, uid: uid, gid: gid, link: "/etc/passwd"},
		"artifacts/pipe":        {typ: tar.TypeFifo, mode: isFifo | 0o620, uid: uid, gid: gid},
		"artifacts/sub/":        {typ: tar.TypeDir, mode: isDir | 0o750, uid: uid, gid: gid},
		"artifacts/sub/b.bin":   {typ: tar.TypeReg, mode: isReg | 0o4755, uid: uid, gid: gid, data: "\x00\x01\x02"},
		"artifacts/sub/deeper/": {typ: tar.TypeDir, mode: isDir | 0o755, uid: uid, gid: gid},
		"artifacts/sub/up":      {typ: tar.TypeSymlink, mode: isLink | 0o777, uid: uid, gid: gid, link: "../.."},
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: %+v (present %v); want %+v", name, g, ok, w)
		}
	}
	for _, name := range names {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected entry %s (%+v): the socket and the links' targets stay out", name, got[name])
		}
	}
	if names[0] != "artifacts/" || !slices.IsSorted(names) {
		t.Errorf("entries out of order: %q", names)
	}

	// What a backend's CopyOut does with it: the same as with Docker's
	// archive. Files and folders come out; links and the fifo are listed.
	buf.Reset()
	must(Pack(&buf, src))
	dst, err := os.OpenRoot(t.TempDir())
	must(err)
	defer dst.Close()
	skipped, err := runtime.ExtractTar(&buf, src, dst, "copy", 0)
	must(err)
	for name, data := range map[string]string{"copy/a.txt": "alpha\n", "copy/sub/b.bin": "\x00\x01\x02"} {
		if got, err := dst.ReadFile(name); err != nil || string(got) != data {
			t.Errorf("extracted %s: %q %v", name, got, err)
		}
	}
	if info, err := dst.Lstat("copy/sub/deeper"); err != nil || !info.IsDir() {
		t.Errorf("copy/sub/deeper: %v %v", info, err)
	}
	slices.Sort(skipped)
	if want := []string{"artifacts/dirlink", "artifacts/out", "artifacts/pipe", "artifacts/sub/up"}; len(skipped) != len(want) || !slices.EqualFunc(skipped, want, strings.HasPrefix) {
		t.Errorf("skipped %q; want %q", skipped, want)
	}
}

// TestPackOne: a file, or a link, packed by itself is one entry named
// after it; a link is not followed.
func TestPackOne(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("x"), 0o600)
	os.Symlink(dir, filepath.Join(dir, "link"))
	for _, c := range []struct {
		name string
		want entry
	}{
		{"f.txt", entry{typ: tar.TypeReg, mode: isReg | 0o600, data: "x"}},
		{"link", entry{typ: tar.TypeSymlink, mode: isLink | 0o777, link: dir}},
	} {
		var buf bytes.Buffer
		if err := Pack(&buf, filepath.Join(dir, c.name)); err != nil {
			t.Fatal(err)
		}
		names, got := readTar(t, &buf)
		g := got[c.name]
		g.uid, g.gid = 0, 0
		if len(names) != 1 || g != c.want {
			t.Errorf("%s: %q %+v; want one entry %+v", c.name, names, got, c.want)
		}
	}
}

func TestPackRefuses(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-folder")
	for _, c := range []struct{ src, want string }{
		{missing, missing},
		{"relative/path", `"relative/path": not an absolute path`},
	} {
		var buf bytes.Buffer
		err := Pack(&buf, c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Pack(%q) = %v; want an error naming %q", c.src, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("Pack(%q) wrote %d bytes before failing", c.src, buf.Len())
		}
	}
	if !errors.Is(Pack(io.Discard, missing), fs.ErrNotExist) {
		t.Error("a missing path is not fs.ErrNotExist")
	}
}

// TestPackReadsWhatWriteTarWrote: files written with runtime.WriteTar and
// unpacked in a container come back out of Pack as they went in, under
// their folder's base name, with owners and modes.
func TestPackReadsWhatWriteTarWrote(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("unpacking with other owners needs root")
	}
	files := []runtime.File{
		{Path: "/logs/artifacts", Mode: fs.ModeDir | fs.ModeSetgid | 0o775, UID: 1000, GID: 1001},
		{Path: "/logs/artifacts/report.json", Data: []byte(`{"ok":true}`), Mode: 0o644, UID: 1000, GID: 1001},
		{Path: "/logs/artifacts/bin/tool", Data: []byte("#!/bin/sh\n"), Mode: 0o755, UID: 0, GID: 0},
		{Path: "/logs/artifacts/secret", Data: []byte("s"), Mode: 0o400, UID: 1002, GID: 1002},
	}
	var in bytes.Buffer
	if err := runtime.WriteTar(&in, files); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := Unpack(&in, root); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Pack(&out, filepath.Join(root, "logs", "artifacts")); err != nil {
		t.Fatal(err)
	}
	_, got := readTar(t, &out)
	for _, f := range files {
		name := strings.TrimPrefix(f.Path, "/logs/")
		w := entry{typ: tar.TypeReg, mode: isReg | int64(f.Mode.Perm()), uid: f.UID, gid: f.GID, data: string(f.Data)}
		if f.Mode.IsDir() {
			w = entry{typ: tar.TypeDir, mode: isDir | int64(f.Mode.Perm()) | 0o2000, uid: f.UID, gid: f.GID}
			name += "/"
		}
		if g := got[name]; g != w {
			t.Errorf("%s: %+v; want %+v", name, g, w)
		}
	}
	// The parent WriteTar made, owned by root.
	if g := got["artifacts/bin/"]; g.typ != tar.TypeDir || g.uid != 0 || g.mode != isDir|0o755 {
		t.Errorf("artifacts/bin/: %+v", g)
	}
}
