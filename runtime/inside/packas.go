package inside

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Cred is one identity an agent ran as: a uid and the groups it had.
type Cred struct {
	UID  int   `json:"uid"`
	GIDs []int `json:"gids"`
}

// ErrForeignLink refuses a path through a symbolic link that someone other
// than root made: an agent's way to point an artifact at a file elsewhere.
var ErrForeignLink = errors.New("a folder on the way is a symbolic link made by a user other than root (an agent's), which troupe does not follow")

// PackAs packs src as Pack does, with the rights of the agents: an entry is
// packed only when one of creds could have reached and read it itself
// (search permission on every folder above it, read permission on a file
// or folder; root reads all), so what is copied out is never more than the
// agents could read. A folder above src that is a link made by a user other
// than root is refused (ErrForeignLink); links inside src are entries of
// their own, never followed, as in Pack. It ignores ACLs and capabilities:
// it can only leave out more than the agents could read, never less.
func PackAs(w io.Writer, src string, creds []Cred) error {
	if !filepath.IsAbs(src) {
		return fmt.Errorf("pack %q: not an absolute path", src)
	}
	src = filepath.Clean(src)
	dir, err := resolveParent(filepath.Dir(src))
	if err != nil {
		return fmt.Errorf("pack %s: %w", src, err)
	}
	real := filepath.Join(dir, filepath.Base(src))
	if src == "/" {
		real = "/"
	}
	// Who reaches the folder src is in: search permission all the way down.
	var reach []Cred
	for _, c := range creds {
		if traverses(c, dir) {
			reach = append(reach, c)
		}
	}
	if _, err := os.Lstat(real); err != nil {
		return fmt.Errorf("pack %s: %w", src, err)
	}
	// searchable: the folders packed so far, by who may search them.
	searchable := map[string][]Cred{dir: reach}
	return packTree(w, real, filepath.Base(src), func(p string, d fs.DirEntry) (bool, error) {
		info, err := d.Info() // an lstat, as WalkDir never follows links
		if err != nil {
			return false, vanished(p, err)
		}
		var who []Cred
		for _, c := range searchable[filepath.Dir(p)] {
			if !info.Mode().IsRegular() && !info.IsDir() || allowed(c, info, 4) {
				who = append(who, c)
			}
		}
		if len(who) > 0 && info.IsDir() {
			var search []Cred
			for _, c := range who {
				if allowed(c, info, 1) {
					search = append(search, c)
				}
			}
			searchable[p] = search
		}
		return len(who) > 0, nil
	})
}

// resolveParent resolves dir's links one folder at a time, refusing any
// link not owned by root, and returns the path with no link left.
func resolveParent(dir string) (string, error) {
	out := "/"
	rest := strings.Split(strings.TrimPrefix(filepath.Clean(dir), "/"), "/")
	for hops := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			out = filepath.Dir(out)
			continue
		}
		p := filepath.Join(out, name)
		info, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			out = p
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); !ok || st.Uid != 0 {
			return "", fmt.Errorf("%s: %w", p, ErrForeignLink)
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many links", p)
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			out = "/"
		}
		rest = append(strings.Split(strings.TrimPrefix(target, "/"), "/"), rest...)
	}
	return out, nil
}

// traverses says whether c may search every folder from / down to dir.
func traverses(c Cred, dir string) bool {
	for p := dir; ; p = filepath.Dir(p) {
		info, err := os.Lstat(p)
		if err != nil || !allowed(c, info, 1) {
			return false
		}
		if p == "/" {
			return true
		}
	}
}

// allowed applies the classic permission check: the owner's bits for the
// owner, the group's for a member, the others' for the rest; root passes.
// want is a permission triple (4 read, 1 search).
func allowed(c Cred, info fs.FileInfo, want uint32) bool {
	if c.UID == 0 {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	perm := uint32(info.Mode().Perm())
	switch {
	case st.Uid == uint32(c.UID):
		perm >>= 6
	case slices.Contains(c.GIDs, int(st.Gid)):
		perm >>= 3
	}
	return perm&want == want
}
