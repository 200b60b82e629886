package staticbin

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestLoadBinary(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/text", []byte("#!/bin/sh\n"), 0o755)
	if _, err := Load(dir + "/text"); !errors.Is(err, ErrNotStatic) {
		t.Errorf("a script: %v", err)
	}
	if _, err := Load("/bin/sh"); !errors.Is(err, ErrNotStatic) && !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a dynamic executable: %v", err)
	}
	if testing.Short() {
		return
	}
	// The caller's GOFLAGS stay out of the static build: -race (a race
	// build of troupe run by go run, with GOFLAGS=-race) needs cgo.
	t.Setenv("GOFLAGS", "-race")
	if err := Build(t.Context(), "../..", dir+"/troupe"); err != nil {
		t.Fatal(err)
	}
	b, err := Load(dir + "/troupe")
	if err != nil || len(b.SHA256) != 64 || len(b.Data) < 1<<20 {
		t.Fatalf("a static build: %v", err)
	}
}
