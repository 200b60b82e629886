package inside

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Prepare is the argument of the "prepare" call (the tunnel's, or troupe
// call prepare), which makes a started container ready for its agents: it
// unpacks the tar it is given at /, makes the copies, and, when Share is
// set, makes that folder the agents' common workspace with group GID.
type Prepare struct {
	Share  string `json:"share,omitempty"`
	GID    int    `json:"gid,omitempty"`
	Copies []Copy `json:"copies,omitempty"`
}

// Copy is a folder of the container copied to another place for one
// agent, owned by it: a task's skills folder put where the agent's
// program reads skills.
type Copy struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
	UID int    `json:"uid"`
	GID int    `json:"gid"`
}

// maxCopy bounds what one Copy writes.
const maxCopy = 64 << 20

// CopyTree copies c.Src's folders and regular files into c.Dst (created
// if missing), owned by c.UID:c.GID, and returns what it left out: links
// (never followed: the copy runs as root), devices and the like, and what
// did not fit in maxCopy. A missing Src copies nothing and says so in
// skipped, as Harbor's agents skip a skills folder that is not there.
func CopyTree(c Copy) (skipped []string, err error) {
	if !filepath.IsAbs(c.Src) || !filepath.IsAbs(c.Dst) {
		return nil, fmt.Errorf("copy %s to %s: both must be absolute paths", c.Src, c.Dst)
	}
	info, err := os.Lstat(c.Src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []string{c.Src + " (not there)"}, nil
	case err != nil:
		return nil, fmt.Errorf("copy %s: %w", c.Src, err)
	case !info.IsDir():
		return []string{c.Src + " (not a folder)"}, nil
	}
	left := int64(maxCopy)
	err = filepath.WalkDir(c.Src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(c.Src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(c.Dst, rel)
		switch {
		case e.IsDir():
			return mkdirOwned(target, c.UID, c.GID)
		case e.Type().IsRegular():
			info, err := e.Info()
			if err != nil {
				return err
			}
			if info.Size() > left {
				skipped = append(skipped, p+" (over the copy's bound)")
				return nil
			}
			left -= info.Size()
			return copyFile(p, target, info.Mode().Perm()|0o400, c.UID, c.GID)
		default:
			skipped = append(skipped, p+" (not a file or folder)")
			return nil
		}
	})
	if err != nil {
		return skipped, fmt.Errorf("copy %s to %s: %w", c.Src, c.Dst, err)
	}
	return skipped, nil
}

// mkdirOwned makes dir and the folders it needs, each new one owned by
// uid:gid: a destination under an agent's home must be its own all the
// way down.
func mkdirOwned(dir string, uid, gid int) error {
	if info, err := os.Lstat(dir); err == nil {
		if !info.IsDir() {
			return fmt.Errorf("%s is there and not a folder", dir)
		}
		return nil
	}
	if err := mkdirOwned(filepath.Dir(dir), uid, gid); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Lchown(dir, uid, gid)
}

// copyFile copies one regular file, replacing one there, never through
// a link at its target.
func copyFile(src, dst string, mode fs.FileMode, uid, gid int) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_NOFOLLOW, mode&^(fs.ModeSetuid|fs.ModeSetgid))
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Lchown(dst, uid, gid)
}
