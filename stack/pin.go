package stack

import (
	"errors"
	"path/filepath"

	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/internal/yamlpin"
)

// ErrNotDefined is Repin's answer for a file that defines no stack of the
// name it was given.
var ErrNotDefined = errors.New("the file defines no stack of that name")

// Repin returns the text of a file that defines stacks (a stacks file or
// troupe's config file) with the pins of stack name, its files' and its
// install script's sha256, set to the HostDigest of each as it is now, and
// the pins it changed. Relative paths are in file's folder. Only the
// digests' text changes (package yamlpin): comments, order and layout
// stay, and a missing sha256 is added beside its path. It reads the stack
// structurally, so it works on a stack whose only problems are its pins.
// A file that cannot be read (one that does not exist, named with what its
// path was resolved against) is a problem located at its path, and then
// nothing is returned. A file without the stack gives ErrNotDefined.
func Repin(file string, data []byte, name string) ([]byte, []yamlpin.Change, error) {
	found := false
	find := func(file string, root *yaml11.Node) ([]yamlpin.Site, error) {
		st := root.Get("stacks").Get(name)
		if st == nil {
			return nil, nil
		}
		found = true
		d := yaml11.Decoder{File: file}
		key := yaml11.Key("stacks", name)
		var sites []yamlpin.Site
		if files := st.Get("files"); files != nil && files.Kind == yaml11.Seq {
			for i, n := range files.Items {
				if s, ok := yamlpin.NewSite(&d, n, yaml11.Index(yaml11.Key(key, "files"), i)); ok {
					sites = append(sites, s)
				}
			}
		}
		if s, ok := yamlpin.NewSite(&d, st.Get("install"), yaml11.Key(key, "install")); ok {
			sites = append(sites, s)
		}
		return sites, d.Err()
	}
	out, changes, err := yamlpin.Rewrite(file, data, find, func(s yamlpin.Site) (string, error) {
		var f File
		f.Path, f.Written = resolve(s.Path(), filepath.Dir(file))
		digest, err := HostDigest(f.Path)
		if err != nil {
			return "", fileError(file, f, err)
		}
		return digest, nil
	})
	if err == nil && !found {
		return nil, nil, ErrNotDefined
	}
	return out, changes, err
}
