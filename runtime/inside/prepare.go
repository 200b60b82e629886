package inside

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Unpack writes a tar stream (as runtime.WriteTar makes it) under root,
// with the owners and modes of its headers. It takes folders and regular
// files only, and refuses a name that would leave root. It runs as root
// inside a trial container, where troupe prepare unpacks the agents' keys,
// tokens and prompts: one exec instead of a copy through the engine.
func Unpack(r io.Reader, root string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		clean := path.Clean("/" + h.Name)
		if clean == "/" || strings.Contains(h.Name, "..") {
			return fmt.Errorf("unpack: refusing the entry %q", h.Name)
		}
		target := filepath.Join(root, filepath.FromSlash(clean))
		mode := os.FileMode(h.Mode).Perm()
		for bit, m := range map[int64]os.FileMode{0o1000: os.ModeSticky, 0o2000: os.ModeSetgid, 0o4000: os.ModeSetuid} {
			if h.Mode&bit != 0 {
				mode |= m
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("unpack %s: %w", clean, err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return fmt.Errorf("unpack %s: %w", clean, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("unpack %s: %w", clean, err)
			}
		default:
			return fmt.Errorf("unpack: %s is neither a file nor a folder", clean)
		}
		// Owner first: chown clears setuid and setgid bits.
		if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
			return fmt.Errorf("unpack %s: %w", clean, err)
		}
		if err := os.Chmod(target, mode); err != nil {
			return fmt.Errorf("unpack %s: %w", clean, err)
		}
	}
}
