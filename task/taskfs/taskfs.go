// Package taskfs is the one reader of a task's folder: every file of a
// task (task.toml, instruction.md, compose and env files, a Dockerfile, a
// build context, tests/ and solution/) is read through a Dir, so that no
// file is read through a symbolic link that leaves the folder.
//
// A Dir is an os.Root: each step of a path is opened beneath the folder and
// a link is resolved there too, so a chain of links each lexically inside
// the folder that ends outside it is refused at the step that leaves, not
// only when the first link looks wrong. Links that stay inside are
// followed. A refused path is a *LinkError naming the file and where its
// links lead; the check and the read are one operation, so a link swapped
// in between cannot redirect the read.
package taskfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks is how many links one path may pass through, as Linux's
// MAXSYMLINKS: a loop of links ends here.
const maxLinks = 40

// ErrOutside is the condition of a *LinkError: the path leads out of the
// task's folder.
var ErrOutside = errors.New("it leads out of the task's folder")

// LinkError is a path of a task that a link takes out of its folder.
type LinkError struct {
	// Dir is the task's folder; Name the path asked for, relative to it.
	Dir, Name string
	// Link is the link (relative to Dir) whose target leaves the folder,
	// Target what it holds, and Leads where the path ends up on this
	// machine.
	Link, Target, Leads string
}

func (e *LinkError) Error() string {
	via := ""
	if e.Link != e.Name {
		via = fmt.Sprintf(" (through the link %s)", e.Link)
	}
	return fmt.Sprintf("%s: %s links to %q, which leads to %s, which is outside the task's folder%s: a task's files are read only inside it",
		filepath.Join(e.Dir, filepath.FromSlash(e.Name)), e.Name, e.Target, e.Leads, via)
}

func (e *LinkError) Unwrap() error { return ErrOutside }

// Dir is a task's folder opened for reading. Its methods take paths
// relative to the folder, with forward slashes.
type Dir struct {
	path string
	root *os.Root
}

// Open opens a task folder. The folder's own path may pass through links
// (a --tasks path is the user's); everything beneath it is read only
// beneath it.
func Open(dir string) (*Dir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	return &Dir{path: abs, root: root}, nil
}

// Path is the folder's absolute path.
func (d *Dir) Path() string { return d.path }

// Close releases the folder.
func (d *Dir) Close() error { return d.root.Close() }

// FS is the folder as an fs.FS (with fs.ReadLinkFS): every Open resolves
// beneath the folder.
func (d *Dir) FS() fs.FS { return d.root.FS() }

// Resolve follows every link of name, each beneath the folder, and returns
// the path it leads to, relative to the folder ("." for the folder
// itself). A path that leaves is a *LinkError; one that does not exist is
// fs.ErrNotExist (wrapped), with the path resolved so far.
func (d *Dir) Resolve(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	pending := splitPath(name)
	var done []string
	links := 0
	lastLink, lastTarget := name, name
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", d.outside(name, lastLink, lastTarget, path.Join(append([]string{".."}, pending...)...))
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		info, err := d.root.Lstat(cur)
		if err != nil {
			if pe, ok := errors.AsType[*fs.PathError](err); ok {
				err = pe.Err
			}
			return "", &fs.PathError{Op: "open", Path: filepath.Join(d.path, filepath.FromSlash(name)), Err: err}
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			if !info.IsDir() && strings.Join(pending, "") != "" {
				return "", fmt.Errorf("%s: %s is not a folder", filepath.Join(d.path, filepath.FromSlash(name)), cur)
			}
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: more than %d links: a loop", filepath.Join(d.path, filepath.FromSlash(name)), maxLinks)
		}
		target, err := d.root.Readlink(cur)
		if err != nil {
			return "", fmt.Errorf("%s: %w", filepath.Join(d.path, filepath.FromSlash(name)), err)
		}
		lastLink, lastTarget = cur, target
		if filepath.IsAbs(target) {
			return "", &LinkError{Dir: d.path, Name: name, Link: cur, Target: target, Leads: filepath.Join(target, filepath.FromSlash(path.Join(pending...)))}
		}
		pending = append(splitPath(target), pending...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

// outside is the *LinkError of a path that climbed above the folder; rest
// is what is left of it, from the folder.
func (d *Dir) outside(name, link, target, rest string) error {
	return &LinkError{Dir: d.path, Name: name, Link: link, Target: target, Leads: filepath.Join(d.path, filepath.FromSlash(rest))}
}

// Host is the path on this machine that name leads to, every link
// resolved beneath the folder: a folder of the task that other code walks
// (its links, not followed there, are checked by CheckLinks).
func (d *Dir) Host(name string) (string, error) {
	rel, err := d.Resolve(name)
	if err != nil {
		return "", err
	}
	return filepath.Join(d.path, filepath.FromSlash(rel)), nil
}

// Stat is the file name leads to, its links followed beneath the folder.
func (d *Dir) Stat(name string) (fs.FileInfo, error) {
	rel, err := d.Resolve(name)
	if err != nil {
		return nil, err
	}
	return d.root.Stat(rel)
}

// IsFile says whether name leads to a regular file inside the folder.
func (d *Dir) IsFile(name string) bool {
	info, err := d.Stat(name)
	return err == nil && info.Mode().IsRegular()
}

// IsDir says whether name leads to a folder inside the folder.
func (d *Dir) IsDir(name string) bool {
	info, err := d.Stat(name)
	return err == nil && info.IsDir()
}

// ReadFile reads a regular file of at most limit bytes (0: no limit).
// A device, socket or pipe is refused without being read: opening one could
// hang the loader.
func (d *Dir) ReadFile(name string, limit int64) ([]byte, error) {
	f, err := d.OpenFile(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	full := filepath.Join(d.path, filepath.FromSlash(name))
	if limit > 0 && info.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes; the limit is %d", full, info.Size(), limit)
	}
	r := io.Reader(f)
	if limit > 0 {
		// A file that grows while it is read stops at the limit too.
		r = io.LimitReader(f, limit+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", full, err)
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is over %d bytes, the limit", full, limit)
	}
	return data, nil
}

// OpenFile opens a regular file for reading; anything else is refused.
func (d *Dir) OpenFile(name string) (*os.File, error) {
	rel, err := d.Resolve(name)
	if err != nil {
		return nil, err
	}
	full := filepath.Join(d.path, filepath.FromSlash(name))
	// O_NONBLOCK: a pipe put where a file was expected opens without a
	// writer instead of waiting for one; it is refused below.
	f, err := d.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err
		}
		return nil, &fs.PathError{Op: "open", Path: full, Err: err}
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", full, err)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s)", full, info.Mode().Type())
	}
	return f, nil
}

// WalkDir walks the tree at name (a folder, its links resolved beneath the
// folder) in lexical order, as fs.WalkDir does: links inside it are
// reported as links, never followed. Paths given to fn are relative to the
// task's folder.
func (d *Dir) WalkDir(name string, fn fs.WalkDirFunc) error {
	rel, err := d.Resolve(name)
	if err != nil {
		return err
	}
	return fs.WalkDir(d.root.FS(), rel, fn)
}

// Readlink is what the link name holds.
func (d *Dir) Readlink(name string) (string, error) {
	return d.root.Readlink(name)
}

// CheckLinks resolves every link under name (the whole folder for ".")
// and returns a *LinkError for each that leads out of the folder, joined.
// A link to something missing inside is not an error: it leads nowhere.
func (d *Dir) CheckLinks(name string) error {
	var errs []error
	err := d.WalkDir(name, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if _, err := d.Resolve(p); errors.Is(err, ErrOutside) {
			errs = append(errs, err)
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

func checkName(name string) error {
	if name == "" || path.IsAbs(name) || filepath.IsAbs(name) || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%q is not a path inside a task's folder", name)
	}
	return nil
}

func splitPath(p string) []string {
	return strings.Split(filepath.ToSlash(p), "/")
}
