package dataset

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFetchRefusesAChainOfLinksOut: the attack of issue 33. Every link of
// the task is lexically inside its folder, so each passes the check made
// as it is written; followed one after the other they reach a .env beside
// the cache. The fetch refuses the task, naming the file, and writes
// nothing of it into the cache.
func TestFetchRefusesAChainOfLinksOut(t *testing.T) {
	const secret = "sk-troupe-dataset-secret-42"
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, ".env"), []byte("OPENAI_API_KEY="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(work, "cache")
	dir, r, files := taskRepo(t, "escape")
	delete(files, "tasks/escape/instruction.md")
	// In the cache the task is cache/tasks/<id>/escape: docs/up is the
	// task, docs/a <id>, docs/b tasks/, docs/c the cache, docs/d work.
	for link, target := range map[string]string{"docs/up": "..", "docs/a": "up/..", "docs/b": "a/..", "docs/c": "b/..", "docs/d": "c/..", "instruction.md": "docs/d/.env"} {
		files["tasks/escape/"+link+" -> "+target] = ""
	}
	c := commit(t, r, dir, files, "a chain of links out")
	ds := lookup(t, "d@1", datasetDoc("d", "1", dir, c, "tasks/escape"))
	got, err := Fetch(t.Context(), ds, cacheDir)
	if err == nil {
		t.Fatalf("fetched %v", got)
	}
	if !strings.Contains(err.Error(), "tasks/escape/instruction.md") || !strings.Contains(err.Error(), "outside the task folder") {
		t.Errorf("the error does not name the link: %v", err)
	}
	filepath.WalkDir(cacheDir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if data, _ := os.ReadFile(p); bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds the secret", p)
			}
		}
		if err == nil && e.Name() == "escape" {
			t.Errorf("the task was left in the cache at %s", p)
		}
		return nil
	})
}
