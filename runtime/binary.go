package runtime

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
)

// BinaryPath is where troupe's binary is placed in every trial container.
const BinaryPath = "/opt/troupe/bin/troupe"

// Binary is troupe's own executable, read once, to copy into containers:
// the same binary runs there as init, tunnel, sweep and agent.
type Binary struct {
	Path   string
	Data   []byte
	SHA256 string
}

// ErrNotStatic means a binary cannot run in an arbitrary container image.
var ErrNotStatic = errors.New("not a static linux/amd64 executable")

// LoadBinary reads a troupe binary and checks that it can run in any
// container: a linux/amd64 ELF with no dynamic loader.
func LoadBinary(path string) (*Binary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("troupe binary: %w", err)
	}
	if err := checkStatic(data); err != nil {
		return nil, fmt.Errorf("troupe binary %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return &Binary{Path: path, Data: data, SHA256: hex.EncodeToString(sum[:])}, nil
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

// SelfBinary returns the running executable if it is static, and otherwise
// builds one from the module source in moduleDir (when moduleDir holds
// troupe's go.mod and the go command is found) into cacheDir. The error says
// how to provide one.
func SelfBinary(ctx context.Context, moduleDir, cacheDir string) (*Binary, error) {
	self, err := os.Executable()
	if err == nil {
		if b, err := LoadBinary(self); err == nil {
			return b, nil
		}
	}
	if moduleDir == "" {
		return nil, fmt.Errorf("the running troupe is %w and no source is at hand to build one; build troupe with CGO_ENABLED=0 go build -o troupe ./cmd/troupe", ErrNotStatic)
	}
	out := filepath.Join(cacheDir, "troupe")
	if err := BuildBinary(ctx, moduleDir, out); err != nil {
		return nil, err
	}
	return LoadBinary(out)
}

// BuildBinary builds a static linux/amd64 troupe from the module at
// moduleDir into out.
func BuildBinary(ctx context.Context, moduleDir, out string) error {
	if _, err := exec.LookPath("go"); err != nil {
		return fmt.Errorf("build a static troupe: the go command is not installed: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("build a static troupe: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/troupe")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build a static troupe in %s: %w\n%s", moduleDir, err, output)
	}
	return nil
}
