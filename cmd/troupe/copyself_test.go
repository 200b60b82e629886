package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCopySelf runs troupe copy-self from a built troupe, as the init
// container of troupe's binary image runs it: the copy is the same bytes,
// 0755, in a folder it made, with no temporary file left beside it.
func TestCopySelf(t *testing.T) {
	bin, err := staticTroupe()
	if err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(t.TempDir(), "troupe")
	if err := os.WriteFile(self, bin.Data, 0o500); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "opt", "troupe", "bin")
	dest := filepath.Join(dir, "troupe")
	for _, round := range []string{"into a new folder", "over an older copy"} {
		if round == "over an older copy" {
			os.Chmod(dest, 0o600)
			os.WriteFile(dest, []byte("an older troupe"), 0o600)
		}
		if out, err := exec.Command(self, "copy-self", dest).CombinedOutput(); err != nil {
			t.Fatalf("%s: troupe copy-self: %v\n%s", round, err, out)
		}
		data, err := os.ReadFile(dest)
		if err != nil || !bytes.Equal(data, bin.Data) {
			t.Errorf("%s: the copy differs (%d bytes of %d): %v", round, len(data), len(bin.Data), err)
		}
		if info, err := os.Stat(dest); err != nil || info.Mode() != 0o755 {
			t.Errorf("%s: the copy's mode is %v, %v; want 0755", round, info.Mode(), err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("%s: %d files in the folder; want the copy alone", round, len(entries))
		}
	}
	if out, err := exec.Command(dest, "copy-self", filepath.Join(dest, "under-a-file")).CombinedOutput(); err == nil || !strings.Contains(string(out), "copy-self") {
		t.Errorf("copy-self under a file: %v\n%s", err, out)
	}
}

// TestCopySelfCopiesTheRunningExecutable: in process, the running
// executable is this test binary.
func TestCopySelfCopiesTheRunningExecutable(t *testing.T) {
	isolate(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(self)
	dest := filepath.Join(t.TempDir(), "a", "b", "troupe")
	if code, _, stderr := troupe(t, "copy-self", dest); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, want) {
		t.Errorf("copied %d bytes of %d", len(got), len(want))
	}
	if code, _, stderr := troupe(t, "copy-self"); code != exitUsage {
		t.Errorf("copy-self without DEST: exit %d %s", code, stderr)
	}
}
