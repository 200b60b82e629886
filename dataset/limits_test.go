package dataset

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
)

// TestFetchBoundsATask: a blob over the file limit is refused from its
// header, a task over its size or entry limit as it is written; each
// error names the limit, the file or task, and the flag that raises it.
func TestFetchBoundsATask(t *testing.T) {
	cases := []struct {
		name   string
		limits Limits
		extra  map[string]int
		want   []string
	}{
		{name: "a big blob", limits: Limits{FileBytes: 1 << 20}, extra: map[string]int{"environment/blob.bin": 8 << 20},
			want: []string{"tasks/big/environment/blob.bin is 8388608 bytes, over 1 MiB", FlagFileMB}},
		{name: "a big task", limits: Limits{TaskBytes: 1 << 20}, extra: map[string]int{"a.bin": 400 << 10, "b.bin": 400 << 10, "c.bin": 400 << 10},
			want: []string{"the task tasks/big is more than 1 MiB", FlagTaskMB}},
		{name: "many entries", limits: Limits{Entries: 8}, extra: map[string]int{"f/1": 1, "f/2": 1, "f/3": 1, "f/4": 1},
			want: []string{"tasks/big holds more than 8 files", FlagEntries}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, r, files := taskRepo(t, "big")
			for name, size := range c.extra {
				files["tasks/big/"+name] = string(make([]byte, size))
			}
			commitID := commit(t, r, dir, files, "a big task")
			ds := lookup(t, "d@1", datasetDoc("d", "1", dir, commitID, "tasks/big"))
			cacheDir := t.TempDir()
			_, err := (&Fetcher{CacheDir: cacheDir, Limits: c.limits}).Fetch(t.Context(), ds)
			if !errors.Is(err, ErrTooBig) {
				t.Fatalf("got %v, want a limit", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q not in %v", w, err)
				}
			}
			if entries, _ := os.ReadDir(filepath.Join(cacheDir, "tasks")); len(entries) != 0 {
				t.Errorf("the cache holds %v", entries)
			}
			// With the defaults the same task is fetched.
			if _, err := Fetch(t.Context(), ds, t.TempDir()); err != nil {
				t.Errorf("with the default limits: %v", err)
			}
		})
	}
}

// TestFetchBoundsTheClone: a repository that sends more than the clone
// limit is cut off while it arrives, and leaves no clone in the cache.
func TestFetchBoundsTheClone(t *testing.T) {
	repo := newTestRepo(t)
	r, err := git.PlainOpen(repo.dir)
	if err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 256<<10) // incompressible: the pack is at least this big
	rand.Read(noise)
	c := commit(t, r, repo.dir, map[string]string{"noise.bin": string(noise)}, "noise")
	base, _ := gitServer(t, filepath.Dir(repo.dir))
	url := base + "/" + filepath.Base(repo.dir)
	ds := lookup(t, "d@1", datasetDoc("d", "1", url, c, "tasks/hello"))
	cacheDir := t.TempDir()
	_, err = (&Fetcher{CacheDir: cacheDir, Limits: Limits{CloneBytes: 64 << 10}}).Fetch(t.Context(), ds)
	if !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), "sent more than 65536 bytes") || !strings.Contains(err.Error(), FlagCloneMB) {
		t.Fatalf("got %v, want the clone limit", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(cacheDir, "repos")); len(entries) != 0 {
		t.Errorf("the cache holds a clone: %v", entries)
	}
	if _, err := Fetch(t.Context(), ds, t.TempDir()); err != nil {
		t.Errorf("with the default limits: %v", err)
	}
}
