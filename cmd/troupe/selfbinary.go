package main

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/staticbin"
)

// selfBin keeps selfBinary's answer: the binary (65 MB) is read and
// hashed once per process, though a Kubernetes run asks for it twice.
var selfBin struct {
	sync.Mutex
	bin   *runtime.Binary
	built string
}

// selfBinary finds a static troupe binary for the containers: this one,
// or one built from troupe's source (staticbin.Self). The source is
// looked for where this binary was built from (go build, go install and go
// run record it, unless -trimpath), then above the current folder.
func selfBinary(ctx context.Context) (*runtime.Binary, string, error) {
	selfBin.Lock()
	defer selfBin.Unlock()
	if selfBin.bin != nil {
		return selfBin.bin, selfBin.built, nil
	}
	bin, built, err := findSelfBinary(ctx)
	if err == nil {
		selfBin.bin, selfBin.built = bin, built
	}
	return bin, built, err
}

func findSelfBinary(ctx context.Context) (bin *runtime.Binary, built string, err error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	var sources []string
	if _, file, _, ok := goruntime.Caller(0); ok && filepath.IsAbs(file) {
		sources = append(sources, filepath.Dir(filepath.Dir(filepath.Dir(file)))) // <module>/cmd/troupe/selfbinary.go
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			sources = append(sources, dir)
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return staticbin.Self(ctx, sources, filepath.Join(cache, "troupe", "bin"))
}
