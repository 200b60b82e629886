// Package examples carries troupe's example mock scenarios into the binary:
// an endpoint named mock/<name> plays scenarios/<name>.yaml wherever troupe
// runs, so the examples need no checkout and no configuration. The example
// manifests and tasks beside them are plain files.
package examples

import (
	"embed"
	"io/fs"
)

//go:embed scenarios/*.yaml
var scenarios embed.FS

// Scenarios serves the built-in scenarios as <name>.yaml.
func Scenarios() fs.FS {
	sub, err := fs.Sub(scenarios, "scenarios")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}
