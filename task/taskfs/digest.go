package taskfs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
)

// Digest is the SHA-256 of a folder: every entry's relative path, mode and
// content, in path order; symlinks are hashed as their target, never
// followed, and every file is read beneath the folder (a Dir). It names a
// built task environment (one build per digest), pins a task in a job's
// lock file and a stack's uploaded folder, and checks a fetched dataset.
func Digest(dir string) (string, error) {
	d, err := Open(dir)
	if err != nil {
		return "", fmt.Errorf("digest of %s: %w", dir, err)
	}
	defer d.Close()
	h := sha256.New()
	err = d.WalkDir(".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", p, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := d.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00", target)
		case info.Mode().IsRegular():
			f, err := d.OpenFile(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("digest of %s: %w", dir, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
