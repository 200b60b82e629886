package inside

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"
)

// Pack writes src, an absolute path, as a tar stream the way Docker's GET
// /containers/{id}/archive gives it, so that a backend without that API
// (Kubernetes) copies out what the Docker backend does, with the same
// reader: entry names start with src's base name ("artifacts/a.txt" for
// /logs/artifacts), folders end with a slash, owners and modes are kept,
// modification times are whole seconds. Links are entries of their own,
// never followed, src itself included; fifos and devices are headers
// without content; sockets, which tar cannot hold, are left out, as Docker
// leaves them out. A file that vanishes while it is packed is left out
// too: the agent's processes may still be writing.
func Pack(w io.Writer, src string) error {
	if !filepath.IsAbs(src) {
		return fmt.Errorf("pack %q: not an absolute path", src)
	}
	src = filepath.Clean(src)
	if _, err := os.Lstat(src); err != nil {
		return fmt.Errorf("pack %s: %w", src, err)
	}
	return packTree(w, src, filepath.Base(src), nil)
}

// packTree writes the tree at real as a tar whose names start with base.
// keep, when set, says of each entry whether to pack it (a folder left out
// is not entered); its errors are the walk's.
func packTree(w io.Writer, real, base string, keep func(p string, d fs.DirEntry) (bool, error)) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return vanished(p, err)
		}
		if keep != nil {
			ok, err := keep(p, d)
			switch {
			case err != nil:
				return err
			case !ok && d.IsDir():
				return fs.SkipDir
			case !ok:
				return nil
			}
		}
		rel, err := filepath.Rel(real, p)
		if err != nil {
			return err
		}
		return packEntry(tw, p, path.Join(base, filepath.ToSlash(rel)))
	})
	if err != nil {
		return fmt.Errorf("pack %s: %w", real, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("pack %s: %w", real, err)
	}
	return nil
}

// vanished forgives an entry that disappeared between listing and reading.
func vanished(p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("%s: %w", p, err)
}

// packEntry writes one entry under name: its header, and a regular file's
// content.
func packEntry(tw *tar.Writer, p, name string) error {
	info, err := os.Lstat(p)
	if err != nil {
		return vanished(p, err)
	}
	if info.Mode()&fs.ModeSocket != 0 {
		return nil
	}
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(p); err != nil {
			return vanished(p, err)
		}
	}
	h, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	h.Name = name
	if info.IsDir() {
		h.Name += "/"
	}
	// As Docker writes them: whole seconds, no access or change times
	// (which would make every header a PAX one).
	h.ModTime = h.ModTime.Truncate(time.Second)
	h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
	h.Mode |= typeBits(info.Mode())
	if h.Typeflag != tar.TypeReg {
		return tw.WriteHeader(h)
	}
	f, err := os.Open(p)
	if err != nil {
		return vanished(p, err)
	}
	defer f.Close()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	// The header promised h.Size bytes: a file that grew is cut there, one
	// that shrank is an error.
	if _, err := io.CopyN(tw, f, h.Size); err != nil {
		return fmt.Errorf("%s changed while it was packed: %w", p, err)
	}
	return nil
}

// typeBits are the file type bits of a stat mode (S_IFDIR and the like),
// which Docker's archives keep in the header's mode as Go's tar did before
// Go 1.9; a reader goes by the type flag and finds them harmless.
func typeBits(m fs.FileMode) int64 {
	switch {
	case m.IsRegular():
		return 0o100000
	case m.IsDir():
		return 0o40000
	case m&fs.ModeSymlink != 0:
		return 0o120000
	case m&fs.ModeCharDevice != 0:
		return 0o20000
	case m&fs.ModeDevice != 0:
		return 0o60000
	case m&fs.ModeNamedPipe != 0:
		return 0o10000
	}
	return 0
}
