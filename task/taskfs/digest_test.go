package taskfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDigest: a folder's digest changes with any entry's path, mode,
// content or link target, and with nothing else.
func TestDigest(t *testing.T) {
	// build writes the base folder, then lets change alter it.
	build := func(t *testing.T, change func(dir string)) string {
		dir := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha"), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "sub", "run.sh"), []byte("#!/bin/sh\n"), 0o755))
		must(t, os.Symlink("a.txt", filepath.Join(dir, "link")))
		if change != nil {
			change(dir)
		}
		digest, err := Digest(dir)
		if err != nil {
			t.Fatal(err)
		}
		return digest
	}
	base := build(t, nil)
	if len(base) != 64 {
		t.Fatalf("digest %q is not a hex SHA-256", base)
	}
	for _, c := range []struct {
		name   string
		change func(dir string)
		same   bool
	}{
		{"nothing changed", func(string) {}, true},
		{"a file's modification time", func(dir string) {
			must(t, os.Chtimes(filepath.Join(dir, "a.txt"), time.Unix(1, 0), time.Unix(1, 0)))
		}, true},
		{"a file's content", func(dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alphA"), 0o644))
		}, false},
		{"a file's mode", func(dir string) {
			must(t, os.Chmod(filepath.Join(dir, "sub", "run.sh"), 0o644))
		}, false},
		{"a file's name", func(dir string) {
			must(t, os.Rename(filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")))
		}, false},
		{"a link's target", func(dir string) {
			must(t, os.Remove(filepath.Join(dir, "link")))
			must(t, os.Symlink("sub/run.sh", filepath.Join(dir, "link")))
		}, false},
		{"an empty folder added", func(dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := build(t, c.change); (got == base) != c.same {
				t.Errorf("digest %s, base %s: want same %v", got, base, c.same)
			}
		})
	}
	if _, err := Digest(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("the digest of a missing folder")
	}
}
