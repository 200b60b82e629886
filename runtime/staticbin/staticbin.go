// Package staticbin provides troupe's own binary for the containers: a
// static linux/amd64 executable, which runs in any task image. It reads
// one and checks it (Load), builds one from troupe's source with the go
// command (Build), and finds the one a process should use (Self): the
// running executable when it is static, else a copy built once from
// troupe's source into a cache folder.
package staticbin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/troupebench/troupe/runtime"
)

// ErrNotStatic means a binary cannot run in an arbitrary container image.
var ErrNotStatic = errors.New("not a static linux/amd64 executable")

// Load reads a troupe binary and checks that it can run in any
// container: a linux/amd64 ELF with no dynamic loader.
func Load(path string) (*runtime.Binary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("troupe binary: %w", err)
	}
	if err := checkStatic(data); err != nil {
		return nil, fmt.Errorf("troupe binary %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return &runtime.Binary{Path: path, Data: data, SHA256: hex.EncodeToString(sum[:])}, nil
}

func checkStatic(data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: not an ELF file", ErrNotStatic)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("%w: built for %s", ErrNotStatic, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%w: it needs a dynamic loader (built with cgo)", ErrNotStatic)
		}
	}
	return nil
}

// Module is troupe's module path: a folder is troupe's source when its
// go.mod declares it.
const Module = "github.com/troupebench/troupe"

// Self returns a static troupe for the containers: the running executable
// when it is static; otherwise one built from troupe's source — the first
// of sources whose go.mod is troupe's — into cacheDir, once per running
// executable (a build with cgo, the default where a C compiler is
// installed, needs a dynamic loader no task image has). built says where
// the copy came from ("" for the running executable); the error says how
// to get a static troupe.
func Self(ctx context.Context, sources []string, cacheDir string) (b *runtime.Binary, built string, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("find the running troupe: %w", err)
	}
	b, err = Load(self)
	if !errors.Is(err, ErrNotStatic) {
		return b, "", err
	}
	src := ""
	for _, dir := range sources {
		if isTroupeSource(dir) {
			src = dir
			break
		}
	}
	if src == "" {
		return nil, "", fmt.Errorf("%w; troupe builds a static copy from its source when it can find it, and found none: "+
			"build troupe with CGO_ENABLED=0 (CGO_ENABLED=0 go install %s/cmd/troupe@latest, or CGO_ENABLED=0 go build -o troupe ./cmd/troupe in a checkout)", err, Module)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return nil, "", fmt.Errorf("read the running troupe: %w", err)
	}
	sum := sha256.Sum256(data)
	out := filepath.Join(cacheDir, "troupe-static-"+hex.EncodeToString(sum[:8]))
	if b, err := Load(out); err == nil {
		return b, src, nil
	}
	tmp := out + ".build"
	if err := Build(ctx, src, tmp); err != nil {
		return nil, "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, "", fmt.Errorf("build a static troupe: %w", err)
	}
	b, err = Load(out)
	return b, src, err
}

// isTroupeSource reports whether dir holds troupe's module.
func isTroupeSource(dir string) bool {
	if dir == "" {
		return false
	}
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	return string(bytes.TrimSpace(line)) == "module "+Module
}

// Build builds a static linux/amd64 troupe from the module at moduleDir
// into out. Its flags are its own: the caller's GOFLAGS are cleared, since
// -race, -msan or -asan (a troupe run with GOFLAGS=-race) need cgo and
// would fail it.
func Build(ctx context.Context, moduleDir, out string) error {
	if _, err := exec.LookPath("go"); err != nil {
		return fmt.Errorf("build a static troupe: the go command is not installed: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("build a static troupe: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/troupe")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build a static troupe in %s: %w\n%s", moduleDir, err, output)
	}
	return nil
}
