package dataset

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// extract writes the folder at p of the commit into dest, checking every
// object read against its id: what is written is what the commit names.
// It returns the folder's tree id.
func extract(st storer.EncodedObjectStorer, commit plumbing.Hash, p, dest string, b *budget) (plumbing.Hash, error) {
	obj, err := verified(st, plumbing.CommitObject, commit)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	c, err := object.DecodeCommit(st, obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("commit %s: %w", commit, err)
	}
	tree := c.TreeHash
	walked := ""
	for _, name := range strings.Split(p, "/") {
		t, err := readTree(st, tree)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		i := slices.IndexFunc(t.Entries, func(e object.TreeEntry) bool { return e.Name == name })
		if i < 0 || t.Entries[i].Mode != filemode.Dir {
			return plumbing.ZeroHash, fmt.Errorf("%w: the commit has no folder %s (%s)", ErrNoTask, path.Join(walked, name), listing(walked, t))
		}
		tree, walked = t.Entries[i].Hash, path.Join(walked, name)
	}
	if err := os.Mkdir(dest, 0o755); err != nil {
		return plumbing.ZeroHash, err
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer root.Close()
	return tree, writeTree(st, root, ".", tree, b)
}

// listing says what a folder of the commit holds, for a message.
func listing(dir string, t *object.Tree) string {
	var names []string
	for _, e := range t.Entries {
		if e.Mode == filemode.Dir {
			names = append(names, e.Name+"/")
		}
	}
	where := "its top level"
	if dir != "" {
		where = dir
	}
	switch {
	case len(names) == 0:
		return where + " holds no folder"
	case len(names) > 10:
		names = append(names[:10], fmt.Sprintf("and %d more", len(names)-10))
	}
	return where + " holds " + strings.Join(names, ", ")
}

// writeTree writes the tree's entries into dir, a folder of root.
func writeTree(st storer.EncodedObjectStorer, root *os.Root, dir string, h plumbing.Hash, b *budget) error {
	t, err := readTree(st, h)
	if err != nil {
		return err
	}
	for _, e := range t.Entries {
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\x00") {
			return fmt.Errorf("tree %s has an entry named %q", h, e.Name)
		}
		rel := path.Join(dir, e.Name)
		if err := b.entry(); err != nil {
			return err
		}
		switch e.Mode {
		case filemode.Dir:
			if err := root.Mkdir(rel, 0o755); err != nil {
				return err
			}
			if err := writeTree(st, root, rel, e.Hash, b); err != nil {
				return err
			}
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			perm := os.FileMode(0o644)
			if e.Mode == filemode.Executable {
				perm = 0o755
			}
			if err := writeBlob(st, root, rel, e.Hash, perm, b); err != nil {
				return err
			}
		case filemode.Symlink:
			if err := writeSymlink(st, root, rel, e.Hash); err != nil {
				return err
			}
		case filemode.Submodule:
			return fmt.Errorf("%s is a git submodule, which troupe does not fetch", rel)
		default:
			return fmt.Errorf("%s has the mode %s, which is not a file, folder or link", rel, e.Mode)
		}
	}
	return nil
}

// sizer is go-git's filesystem storage: it reads an object's size from its
// header, where EncodedObject may read (and inflate) the whole object.
type sizer interface {
	EncodedObjectSize(plumbing.Hash) (int64, error)
}

func writeBlob(st storer.EncodedObjectStorer, root *os.Root, rel string, h plumbing.Hash, perm os.FileMode, b *budget) (err error) {
	// A blob over the limits is refused from its header, before it is
	// read, let alone written.
	if sz, ok := st.(sizer); ok {
		if size, err := sz.EncodedObjectSize(h); err == nil {
			if err := b.check(path.Join(b.task, rel), size); err != nil {
				return err
			}
		}
	}
	obj, err := st.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return fmt.Errorf("%s: blob %s: %w", rel, h, err)
	}
	if err := b.file(path.Join(b.task, rel), obj.Size()); err != nil {
		return err
	}
	r, err := obj.Reader()
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	defer r.Close()
	f, err := root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	hasher := plumbing.NewHasher(plumbing.BlobObject, obj.Size())
	// A blob that reads longer than its header says is cut one byte past
	// it, and refused by its hash.
	if _, err := io.Copy(io.MultiWriter(f, hasher), io.LimitReader(r, obj.Size()+1)); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if got := hasher.Sum(); got != h {
		return fmt.Errorf("%s: the repository's blob %s reads as %s: the repository is damaged", rel, h, got)
	}
	return nil
}

// writeSymlink writes a link that stays inside the task folder; one that
// points out of it (absolute, or up past the top) would make the task
// depend on the machine it runs on.
func writeSymlink(st storer.EncodedObjectStorer, root *os.Root, rel string, h plumbing.Hash) error {
	obj, err := verified(st, plumbing.BlobObject, h)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	r, err := obj.Reader()
	if err != nil {
		return err
	}
	target, err := io.ReadAll(io.LimitReader(r, 4096))
	r.Close()
	if err != nil {
		return err
	}
	if t := string(target); path.IsAbs(t) || !fs.ValidPath(path.Join(path.Dir(rel), t)) {
		return fmt.Errorf("%s links to %q, outside the task folder", rel, t)
	}
	return root.Symlink(string(target), rel)
}

func readTree(st storer.EncodedObjectStorer, h plumbing.Hash) (*object.Tree, error) {
	obj, err := verified(st, plumbing.TreeObject, h)
	if err != nil {
		return nil, err
	}
	t, err := object.DecodeTree(st, obj)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", h, err)
	}
	return t, nil
}

// verified reads an object and checks that its content hashes to its id.
func verified(st storer.EncodedObjectStorer, t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	obj, err := st.EncodedObject(t, h)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", t, h, err)
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", t, h, err)
	}
	defer r.Close()
	hasher := plumbing.NewHasher(t, obj.Size())
	if _, err := io.Copy(hasher, r); err != nil {
		return nil, fmt.Errorf("%s %s: %w", t, h, err)
	}
	if got := hasher.Sum(); got != h {
		return nil, fmt.Errorf("%s %s reads as %s: the repository is damaged", t, h, got)
	}
	return obj, nil
}
