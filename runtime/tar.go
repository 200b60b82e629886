package runtime

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
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
