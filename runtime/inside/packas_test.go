package inside

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPackAsTheAgents: an artifact folder is packed with the agents'
// rights: what they could not read (a root-only file, a file in a folder
// they could not search) is left out, and a folder on the way that an
// agent turned into a link is refused; root packs all.
func TestPackAsTheAgents(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes files of other users: run it as root (CI does)")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755) // t.TempDir makes it 0700: no agent would reach it
	const agent, group = 10001, 10000
	mk := func(rel string, mode os.FileMode, uid int, dirEntry bool) {
		t.Helper()
		p := filepath.Join(dir, rel)
		var err error
		if dirEntry {
			err = os.Mkdir(p, mode)
		} else {
			err = os.WriteFile(p, []byte(rel), mode)
		}
		if err == nil {
			err = os.Chmod(p, mode)
		}
		if err == nil {
			err = os.Lchown(p, uid, group)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	mk("art", 0o755, agent, true)
	mk("art/mine.txt", 0o600, agent, false)
	mk("art/shared.txt", 0o640, 0, false)
	mk("art/root-only", 0o600, 0, false)
	mk("art/closed", 0o700, 0, true)
	mk("art/closed/inside.txt", 0o644, 0, false)
	mk("secret", 0o700, 0, true)
	mk("secret/key", 0o600, 0, false)
	// An agent's link, to a folder it cannot read, and one inside the artifact.
	if err := os.Symlink(filepath.Join(dir, "secret"), filepath.Join(dir, "art", "to-secret")); err != nil {
		t.Fatal(err)
	}
	os.Lchown(filepath.Join(dir, "art", "to-secret"), agent, group)
	if err := os.Symlink(filepath.Join(dir, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	os.Lchown(filepath.Join(dir, "link"), agent, group)

	agents := []Cred{{UID: agent, GIDs: []int{group}}}
	got := packed(t, filepath.Join(dir, "art"), agents)
	want := []string{"art/", "art/mine.txt", "art/shared.txt", "art/to-secret"}
	if !slices.Equal(got, want) {
		t.Errorf("packed as the agents: %v, want %v", got, want)
	}
	all := packed(t, filepath.Join(dir, "art"), []Cred{{UID: 0}})
	if !slices.Contains(all, "art/root-only") || !slices.Contains(all, "art/closed/inside.txt") {
		t.Errorf("packed as root: %v, want everything", all)
	}
	// Through the agent's link: refused, not followed.
	err := PackAs(io.Discard, filepath.Join(dir, "link", "key"), agents)
	if !errors.Is(err, ErrForeignLink) {
		t.Errorf("through an agent's link: %v, want ErrForeignLink", err)
	}
	// A root-only file named directly: left out, nothing of it copied.
	if got := packed(t, filepath.Join(dir, "secret", "key"), agents); len(got) != 0 {
		t.Errorf("a file in a folder the agents cannot search: %v", got)
	}
	// With no agent at all (none could read): nothing.
	if got := packed(t, filepath.Join(dir, "art"), nil); len(got) != 0 {
		t.Errorf("with no credentials: %v", got)
	}
}

func packed(t *testing.T, src string, creds []Cred) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := PackAs(&buf, src, creds); err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}
