package inside

import (
	"os"
	"path/filepath"
	"slices"
)

// CommandDirs are the folders a verifier's shell looks commands up in, in
// order: the usual PATH of Debian-like images.
var CommandDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// Shadows returns those of added (files new in the container) that sit in
// one of dirs and shadow a command of the same name in a later one: a new
// /usr/local/bin/sh runs instead of /bin/sh for every script that says sh.
func Shadows(added, dirs []string) []string {
	var out []string
	for _, p := range added {
		i := slices.Index(dirs, filepath.Dir(p))
		if i < 0 {
			continue
		}
		for _, later := range dirs[i+1:] {
			if same(later, filepath.Dir(p)) {
				continue
			}
			if _, err := os.Lstat(filepath.Join(later, filepath.Base(p))); err == nil {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// same says whether two folders are one (/bin a link to /usr/bin, as in
// images with a merged /usr).
func same(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}
