package trial

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/task"
)

// TestNoTaskFileReadThroughLinksOut: issue 33's attack, end to end. A
// task's instruction.md is a chain of links, each lexically inside the
// task's folder, that ends at a .env beside it holding an API key. The
// task is refused before any trial starts, naming the file; were it
// loaded (as before taskfs), the trial is run on the mock gateway to show
// where the key goes: into the orchestrator's requests, on the record.
func TestNoTaskFileReadThroughLinksOut(t *testing.T) {
	const secret = "sk-proj-links-attack-0123456789abcdef"
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, ".env"), []byte("OPENAI_API_KEY="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(host, "hello-world")
	if err := os.CopyFS(dir, os.DirFS(helloWorld)); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "instruction.md"))
	os.MkdirAll(filepath.Join(dir, "docs"), 0o755)
	for link, target := range map[string]string{"docs/up": "..", "docs/host": "up/..", "instruction.md": "docs/host/.env"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	tk, err := task.Load(dir, task.Options{})
	if err == nil {
		env := testEnv(t)
		tm := team(t, "../examples/manifests/solo.yaml")
		_, trialDir := runSpec(t, env, Spec{Name: "t__" + tm.Manifest.Condition + "__1", Team: tm, ManifestPath: "../examples/manifests/solo.yaml", Task: tk, Attempt: 1})
		filepath.WalkDir(trialDir, func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() && strings.Contains(string(readPlain(t, p)), secret) {
				t.Errorf("%s holds the host's key", p)
			}
			return nil
		})
		t.Fatalf("the task was loaded, its instruction %q", clip.Head(tk.Instruction, 60))
	}
	for _, want := range []string{filepath.Join(dir, "instruction.md"), "outside the task's folder", filepath.Join(host, ".env")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q not in the refusal: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the refusal quotes the key: %v", err)
	}
}
