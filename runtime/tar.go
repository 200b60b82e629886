package runtime

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// WriteTar writes files as a tar stream with paths relative to the root,
// owners and modes in the headers (setuid, setgid and sticky bits too), and
// every missing parent folder first, owned by root: what a backend copies
// into a container, and what troupe prepare unpacks inside one.
func WriteTar(w io.Writer, files []File) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, f := range files {
		if f.Mode.IsDir() {
			dirs[path.Clean(f.Path)] = true
		}
	}
	// Parent folders not given explicitly, shallowest first.
	var parents []string
	for _, f := range files {
		for p := path.Dir(path.Clean(f.Path)); p != "/" && p != "."; p = path.Dir(p) {
			if !dirs[p] {
				dirs[p] = true
				parents = append(parents, p)
			}
		}
	}
	sort.Slice(parents, func(i, j int) bool { return strings.Count(parents[i], "/") < strings.Count(parents[j], "/") })
	now := time.Now()
	for _, p := range parents {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(p, "/") + "/", Mode: 0o755, ModTime: now}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if !path.IsAbs(f.Path) {
			return fmt.Errorf("file path %q is not absolute", f.Path)
		}
		name := strings.TrimPrefix(path.Clean(f.Path), "/")
		h := &tar.Header{Name: name, Mode: int64(f.Mode.Perm()), Uid: f.UID, Gid: f.GID, ModTime: now, Typeflag: tar.TypeReg, Size: int64(len(f.Data))}
		for bit, mode := range map[fs.FileMode]int64{fs.ModeSticky: 0o1000, fs.ModeSetgid: 0o2000, fs.ModeSetuid: 0o4000} {
			if f.Mode&bit != 0 {
				h.Mode |= mode
			}
		}
		if f.Mode.IsDir() {
			h.Typeflag, h.Name, h.Size = tar.TypeDir, name+"/", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !f.Mode.IsDir() {
			if _, err := tw.Write(f.Data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// Limits of ExtractTar: its own bounds when the caller gives none, and how
// many entries it copies and lists at most.
const (
	maxCopyOutFile    = 256 << 20
	maxCopyOutTotal   = 1 << 30
	maxCopyOutEntries = 10_000
	maxSkippedListed  = 100
)

// ExtractTar writes an archive of the container's folder or file src (its
// entries named from path.Base(src), as a backend's copy-out gives them)
// into dst under dstPath: what Container.CopyOut does once the backend has
// the archive. Only regular files and folders are written, inside dst only
// (os.Root refuses anything that would leave it), and never over a file
// already there; links, devices, files over the limit (limit <= 0: 1 GiB in
// all) and such collisions are skipped and listed.
func ExtractTar(r io.Reader, src string, dst *os.Root, dstPath string, limit int64) (skipped []string, err error) {
	if limit <= 0 {
		limit = maxCopyOutTotal
	}
	var unlisted int
	skip := func(why string) {
		if len(skipped) < maxSkippedListed {
			skipped = append(skipped, why)
		} else {
			unlisted++
		}
	}
	defer func() {
		if unlisted > 0 {
			skipped = append(skipped, fmt.Sprintf("and %d more entries", unlisted))
		}
	}()
	tr := tar.NewReader(r)
	base := path.Base(path.Clean(src))
	var total int64
	for entries := 0; ; entries++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return skipped, nil
		}
		if err != nil {
			return skipped, err
		}
		// The archive's names start with src's base name; they go under dstPath.
		rel := strings.TrimPrefix(path.Clean(h.Name), base)
		rel = strings.TrimPrefix(rel, "/")
		target := path.Join(dstPath, rel)
		if !fs.ValidPath(target) {
			skip(h.Name + " (its path leaves the destination)")
			continue
		}
		if entries >= maxCopyOutEntries {
			skip(fmt.Sprintf("%s (over %d entries)", h.Name, maxCopyOutEntries))
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := dst.MkdirAll(target, 0o755); err != nil {
				return skipped, fmt.Errorf("copy out %s: %w", h.Name, err)
			}
		case tar.TypeReg:
			if h.Size > maxCopyOutFile || total+h.Size > limit {
				skip(fmt.Sprintf("%s (%d bytes; over the copy-out limit of %d bytes)", h.Name, h.Size, limit))
				continue
			}
			total += h.Size
			if err := extractFile(tr, h, dst, target, skip); err != nil {
				return skipped, err
			}
		default:
			skip(h.Name + " (not a regular file or folder)")
		}
	}
}

// extractFile writes one regular file of an archive, never over one
// already there.
func extractFile(tr *tar.Reader, h *tar.Header, dst *os.Root, target string, skip func(string)) error {
	if dir := path.Dir(target); dir != "." {
		if err := dst.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("copy out %s: %w", h.Name, err)
		}
	}
	f, err := dst.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		skip(h.Name + " (a file of that name is already there: it is kept)")
		return nil
	}
	if err != nil {
		skip(fmt.Sprintf("%s (%v)", h.Name, err))
		return nil
	}
	_, err = io.Copy(f, io.LimitReader(tr, h.Size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy out %s: %w", h.Name, err)
	}
	return nil
}
