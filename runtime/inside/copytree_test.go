package inside

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestCopyTree: folders and files are copied, owned by the agent, links
// are named and never followed, and a missing source copies nothing.
func TestCopyTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("CopyTree gives files to another uid: run as root")
	}
	src, home := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(src, "pdf", "scripts"), 0o755)
	os.WriteFile(filepath.Join(src, "pdf", "SKILL.md"), []byte("# pdf"), 0o644)
	os.WriteFile(filepath.Join(src, "pdf", "scripts", "run.sh"), []byte("echo"), 0o755)
	secret := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(secret, []byte("root only"), 0o600)
	os.Symlink(secret, filepath.Join(src, "pdf", "leak"))
	dst := filepath.Join(home, ".claude", "skills")

	skipped, err := CopyTree(Copy{Src: src, Dst: dst, UID: 10001, GID: 10001})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "leak (not a file or folder)") {
		t.Errorf("skipped %q", skipped)
	}
	for _, p := range []string{".claude", ".claude/skills", ".claude/skills/pdf", ".claude/skills/pdf/SKILL.md", ".claude/skills/pdf/scripts/run.sh"} {
		info, err := os.Lstat(filepath.Join(home, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if st := info.Sys().(*syscall.Stat_t); st.Uid != 10001 || st.Gid != 10001 {
			t.Errorf("%s is owned by %d:%d", p, st.Uid, st.Gid)
		}
	}
	if info, err := os.Stat(filepath.Join(dst, "pdf", "scripts", "run.sh")); err != nil || info.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh lost its mode: %v %v", info, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "pdf", "leak")); err == nil {
		t.Error("the link was copied")
	}
	skipped, err = CopyTree(Copy{Src: filepath.Join(src, "none"), Dst: dst, UID: 1, GID: 1})
	if err != nil || !slices.Equal(skipped, []string{filepath.Join(src, "none") + " (not there)"}) {
		t.Errorf("a missing source: %q %v", skipped, err)
	}
	if _, err := CopyTree(Copy{Src: "rel", Dst: dst}); err == nil {
		t.Error("a relative source was taken")
	}
}
