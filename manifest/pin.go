package manifest

import (
	"os"

	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/internal/yamlpin"
)

// PinChange is one digest Repin sets: a stale or missing pin and the digest
// of the file as it is now.
type PinChange = yamlpin.Change

// Repin returns the manifest text with every pin set to the SHA-256 of its
// file now, and the pins it changed. Only the digests' text changes: comments,
// quoting, order and layout stay; a missing sha256 key is added beside its
// path. It reads the manifest structurally, so it works on a manifest whose
// only problems are its pins. Unreadable files are reported, located, and
// nothing is returned.
func Repin(file string, data []byte, src Sources) ([]byte, []PinChange, error) {
	var rootDir *os.Root
	defer func() {
		if rootDir != nil {
			rootDir.Close()
		}
	}()
	return yamlpin.Rewrite(file, data, pinSites, func(s yamlpin.Site) (string, error) {
		data, err := readArtifact(&rootDir, src, s.Path())
		if err != nil {
			return "", err
		}
		return digest(data), nil
	})
}

// pinSites finds roster[i].prompt, .persona and .skills[j] mappings.
func pinSites(file string, root *yaml11.Node) ([]yamlpin.Site, error) {
	d := yaml11.Decoder{File: file}
	var sites []yamlpin.Site
	add := func(n *yaml11.Node, key string) {
		if s, ok := yamlpin.NewSite(&d, n, key); ok {
			sites = append(sites, s)
		}
	}
	roster := root.Get("roster")
	if roster == nil || roster.Kind != yaml11.Seq {
		d.Errorf(root, "roster", "no roster list to pin")
		return nil, d.Err()
	}
	for i, class := range roster.Items {
		key := yaml11.Index("roster", i)
		add(class.Get("prompt"), yaml11.Key(key, "prompt"))
		add(class.Get("persona"), yaml11.Key(key, "persona"))
		if skills := class.Get("skills"); skills != nil && skills.Kind == yaml11.Seq {
			for j, s := range skills.Items {
				add(s, yaml11.Index(yaml11.Key(key, "skills"), j))
			}
		}
	}
	return sites, d.Err()
}
