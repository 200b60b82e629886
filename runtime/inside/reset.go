package inside

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// maxListed bounds how many removed entries Reset names; the rest are
// counted.
const maxListed = 50

// Reset makes dir an empty folder owned by uid:gid with mode perm, whatever
// was there before: a file, a link, a folder full of things. Its parent
// folders must be real folders, not links that would send dir somewhere
// else: one that is not is removed and made again (owned by root, 0755). It
// returns what it removed, for the trial's record. It runs as root inside
// a trial container before the verifier: what agents left in /logs/verifier
// (a reward written in advance) or in /tests must not count.
func Reset(dir string, uid, gid int, perm fs.FileMode) (removed []string, err error) {
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) || dir == "/" {
		return nil, fmt.Errorf("reset %s: not an absolute folder below /", dir)
	}
	note := func(p string, info fs.FileInfo) {
		switch {
		case len(removed) == maxListed:
			removed = append(removed, "… and more")
		case len(removed) > maxListed:
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			removed = append(removed, fmt.Sprintf("%s (a link to %s)", p, target))
		case info.IsDir():
			removed = append(removed, p+"/")
		default:
			removed = append(removed, fmt.Sprintf("%s (%d bytes)", p, info.Size()))
		}
	}
	// The parents, from the top: each must be a folder, not a link.
	var parents []string
	for p := filepath.Dir(dir); p != "/"; p = filepath.Dir(p) {
		parents = append([]string{p}, parents...)
	}
	for _, p := range parents {
		info, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return removed, fmt.Errorf("reset %s: %w", dir, err)
		case info.IsDir():
			continue
		default:
			note(p, info)
			if err := os.Remove(p); err != nil {
				return removed, fmt.Errorf("reset %s: remove %s: %w", dir, p, err)
			}
		}
		if err := os.Mkdir(p, 0o755); err != nil {
			return removed, fmt.Errorf("reset %s: %w", dir, err)
		}
	}
	info, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return removed, fmt.Errorf("reset %s: %w", dir, err)
	case info.IsDir():
		// WalkDir never follows a link: a link inside is removed as one.
		filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || p == dir {
				return nil
			}
			if info, err := e.Info(); err == nil {
				note(p, info)
			}
			return nil
		})
		if err := os.RemoveAll(dir); err != nil {
			return removed, fmt.Errorf("reset %s: %w", dir, err)
		}
	default:
		note(dir, info)
		if err := os.Remove(dir); err != nil {
			return removed, fmt.Errorf("reset %s: %w", dir, err)
		}
	}
	if err := os.Mkdir(dir, perm); err != nil {
		return removed, fmt.Errorf("reset %s: %w", dir, err)
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return removed, fmt.Errorf("reset %s: %w", dir, err)
	}
	if err := os.Chmod(dir, perm); err != nil { // not the umask's
		return removed, fmt.Errorf("reset %s: %w", dir, err)
	}
	return removed, nil
}
