package stack

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestHostDigestIsWhatVerifyAccepts: the digest HostDigest gives a file
// bigger than any manifest (3 MiB) and a folder is the pin Verify
// accepts, and it changes with a byte of either; a FIFO has none.
func TestHostDigestIsWhatVerifyAccepts(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "agent.tar.gz")
	os.WriteFile(big, bytes.Repeat([]byte("troupe\x00"), 3<<20/7+1), 0o644)
	lib := filepath.Join(dir, "lib")
	os.MkdirAll(filepath.Join(lib, "sub"), 0o755)
	os.WriteFile(filepath.Join(lib, "sub", "a.txt"), []byte("a"), 0o644)

	for _, c := range []struct {
		name, path string
		change     func()
	}{
		{"a 3 MiB file", big, func() { os.WriteFile(big, []byte("other"), 0o644) }},
		{"a folder", lib, func() { os.WriteFile(filepath.Join(lib, "sub", "a.txt"), []byte("b"), 0o644) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			digest, err := HostDigest(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if !validDigest(digest) {
				t.Fatalf("%q is not a pin Check accepts", digest)
			}
			st := &Stack{Name: "s", Command: []string{"/opt/s/x"}, Files: []File{{Path: c.path, To: "/opt/s/x", SHA256: digest}}}
			if _, err := st.Verify(); err != nil {
				t.Fatalf("the printed digest does not verify: %v", err)
			}
			c.change()
			if again, _ := HostDigest(c.path); again == digest {
				t.Error("the digest did not change with the content")
			}
			if _, err := st.Verify(); err == nil {
				t.Error("a changed file still verifies")
			}
		})
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := HostDigest(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file or folder") {
		t.Errorf("a FIFO: %v", err)
	}
}

const stalePins = `# Our stacks (comments stay).
stacks:
  mine:
    command: [/opt/mine/agent]   # runs the upload
    files:
      - {path: dist/agent, to: /opt/mine/agent, mode: "0755", sha256: "sha256:…"}
      - path: dist/lib
        to: /opt/mine/lib
        sha256: sha256:0000000000000000000000000000000000000000000000000000000000000000  # stale
      - {path: dist/extra, to: /opt/mine/extra}
    install: {path: install.sh, sha256: "OLD"}
  other:
    command: [/opt/other]
    files:
      - {path: dist/agent, to: /opt/other, sha256: "sha256:1111111111111111111111111111111111111111111111111111111111111111"}
`

// TestRepin: a stack's pins are set to its files' digests as they are
// now, whatever they were (a placeholder, a stale digest, none); the rest
// of the file, another stack's pins included, stays as it was written.
func TestRepin(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	os.MkdirAll(filepath.Join(dir, "dist", "lib"), 0o755)
	os.WriteFile(filepath.Join(dir, "dist", "agent"), []byte("agent v2"), 0o755)
	os.WriteFile(filepath.Join(dir, "dist", "lib", "l.so"), []byte("lib"), 0o644)
	os.WriteFile(filepath.Join(dir, "dist", "extra"), []byte("extra"), 0o644)
	os.WriteFile(filepath.Join(dir, "install.sh"), []byte("#!/bin/sh\n"), 0o755)
	digest := func(rel string) string {
		d, err := HostDigest(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	out, changes, err := Repin(path, []byte(stalePins), "mine")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer(
		`{path: dist/agent, to: /opt/mine/agent, mode: "0755", sha256: "sha256:…"}`, `{path: dist/agent, to: /opt/mine/agent, mode: "0755", sha256: "`+digest("dist/agent")+`"}`,
		"sha256: sha256:0000000000000000000000000000000000000000000000000000000000000000  # stale", `sha256: "`+digest("dist/lib")+`"  # stale`,
		"{path: dist/extra, to: /opt/mine/extra}", `{path: dist/extra, sha256: "`+digest("dist/extra")+`", to: /opt/mine/extra}`,
		`{path: install.sh, sha256: "OLD"}`, `{path: install.sh, sha256: "`+digest("install.sh")+`"}`,
	).Replace(stalePins)
	if string(out) != want {
		t.Errorf("rewritten file differs.\n--- got\n%s\n--- want\n%s", out, want)
	}
	var keys []string
	for _, c := range changes {
		keys = append(keys, c.Key+" "+c.Path+" "+c.Old)
	}
	if got := strings.Join(keys, "\n"); got != "stacks.mine.files[0] dist/agent sha256:…\n"+
		"stacks.mine.files[1] dist/lib sha256:0000000000000000000000000000000000000000000000000000000000000000\n"+
		"stacks.mine.files[2] dist/extra \nstacks.mine.install install.sh OLD" {
		t.Errorf("changes:\n%s", got)
	}
	set, err := ParseFile(path, out)
	if err != nil {
		t.Fatalf("the repinned file does not parse: %v", err)
	}
	if _, err := set["mine"].Verify(); err != nil {
		t.Errorf("the repinned stack does not verify: %v", err)
	}
	again, changes, err := Repin(path, out, "mine")
	if err != nil || len(changes) != 0 || string(again) != string(out) {
		t.Errorf("repinning a pinned stack changed it: %v %+v", err, changes)
	}

	if _, _, err := Repin(path, []byte(stalePins), "nobody"); !errors.Is(err, ErrNotDefined) {
		t.Errorf("an undefined stack: %v", err)
	}
	os.Remove(filepath.Join(dir, "dist", "extra"))
	_, _, err = Repin(path, []byte(stalePins), "mine")
	wantErr := path + ":10:16: stacks.mine.files[2].path: dist/extra (resolved against " + dir + ", the folder of " + path + ": " + filepath.Join(dir, "dist", "extra") + ") does not exist"
	if err == nil || err.Error() != wantErr || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file:\n%v\nwant\n%s", err, wantErr)
	}
}

// TestRelativePaths: a relative path in a stack says, when it fails, what
// it was resolved against: a file's, the folder of the file that defines
// the stack; the command's, the container's working folder.
func TestRelativePaths(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	for _, c := range []struct {
		name, doc, want string
	}{
		{"a missing file", "stacks:\n  s:\n    command: [/opt/s/agent]\n    files:\n      - {path: ./dist/agent, to: /opt/s/agent, sha256: " + digestOf(nil) + "}\n",
			"stack s: ./dist/agent (resolved against " + dir + ", the folder of " + path + ": " + filepath.Join(dir, "dist", "agent") + ") does not exist"},
		{"a missing install script", "stacks:\n  s:\n    command: [/opt/s/agent]\n    install: {path: ../install.sh, sha256: " + digestOf(nil) + "}\n",
			"stack s: install: ../install.sh (resolved against " + dir + ", the folder of " + path + ": " + filepath.Join(filepath.Dir(dir), "install.sh") + ") does not exist"},
		{"a relative command", "stacks:\n  s:\n    command: [./dist/agent, --team]\n",
			"command: ./dist/agent is a relative path, which the container resolves against the task's working folder (TROUPE_WORKDIR, such as /app), not against " + dir + ", the folder of " + path + "; upload the program with files:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, err := ParseFile(path, []byte(c.doc))
			if err == nil {
				_, err = set["s"].Verify()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v\nwant %s", err, c.want)
			}
		})
	}
	// An absolute path is shown as it is; a bare command is looked up in PATH.
	set, err := ParseFile(path, []byte("stacks:\n  s:\n    command: [goose]\n    files:\n      - {path: "+filepath.Join(dir, "gone")+", to: /opt/s/gone, sha256: "+digestOf(nil)+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set["s"].Verify(); err == nil || err.Error() != "stack s: "+filepath.Join(dir, "gone")+" does not exist" {
		t.Errorf("an absolute path: %v", err)
	}
}
