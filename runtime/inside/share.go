package inside

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Share makes a folder the agents' common workspace: it is created if
// missing, and it and everything in it gets group gid, group read and write
// (and search where the owner has it), and new entries in its folders
// inherit the group (setgid). Symbolic links are left alone, never followed.
// It runs as root inside the container before the agents start, so that
// agents with their own uids can all work on the task's files.
func Share(dir string, gid int) error {
	if err := os.MkdirAll(dir, 0o2775); err != nil {
		return fmt.Errorf("share %s: %w", dir, err)
	}
	return filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("share %s: %w", p, err)
		}
		if e.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("share %s: %w", p, err)
		}
		if err := os.Lchown(p, -1, gid); err != nil {
			return fmt.Errorf("share %s: %w", p, err)
		}
		mode := info.Mode()
		perm := mode.Perm() | 0o060
		if mode&0o100 != 0 || e.IsDir() {
			perm |= 0o010
		}
		extra := mode & (fs.ModeSetuid | fs.ModeSticky)
		if e.IsDir() {
			extra |= fs.ModeSetgid
		} else {
			extra &^= fs.ModeSetuid // a shared file must not run as its owner
		}
		if !e.IsDir() && !mode.IsRegular() {
			return nil // devices, sockets, pipes: ownership only
		}
		if err := os.Chmod(p, perm|extra); err != nil {
			return fmt.Errorf("share %s: %w", p, err)
		}
		return nil
	})
}
