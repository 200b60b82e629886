package stack

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/internal/yaml11"
)

// parseDoc decodes a stacks document whose paths are relative to dir.
func parseDoc(t *testing.T, doc, dir string) (Set, error) {
	t.Helper()
	root, err := yaml11.Parse("f.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	d := yaml11.Decoder{File: "f.yaml"}
	var set Set
	d.Struct(root, "", []yaml11.Field{{Name: "stacks", Decode: func(n *yaml11.Node, p string) { set = Parse(&d, n, p, dir, "f.yaml") }}}, nil)
	return set, d.Err()
}

// TestParseInstall: a stack's install script, its user and its timeout;
// every mistake located.
func TestParseInstall(t *testing.T) {
	dir := t.TempDir()
	script := []byte("#!/bin/sh\necho installing\n")
	os.WriteFile(filepath.Join(dir, "install.sh"), script, 0o644)
	sum := digestOf(script)
	head := "stacks:\n  g:\n    command: [/usr/local/bin/g]\n"
	for _, c := range []struct {
		name, doc string
		want      func(*Stack) bool
		err       string
	}{
		{"none", head, func(s *Stack) bool { return s.Install == nil && s.InstallUser == "" && s.InstallTimeout == 0 }, ""},
		{"script", head + "    install: {path: install.sh, sha256: " + sum + "}\n", func(s *Stack) bool {
			return s.Install.Path == filepath.Join(dir, "install.sh") && s.Install.SHA256 == sum && s.InstallUser == "" && s.InstallTimeout == 0
		}, ""},
		{"absolute path, user and timeout", head + "    install: {path: " + filepath.Join(dir, "install.sh") + ", sha256: " + sum + "}\n    install_user: \"1000:1000\"\n    install_timeout_sec: 90.5\n",
			func(s *Stack) bool {
				return s.Install.Path == filepath.Join(dir, "install.sh") && s.InstallUser == "1000:1000" && s.InstallTimeout == 90500*time.Millisecond
			}, ""},
		{"named user", head + "    install: {path: install.sh, sha256: " + sum + "}\n    install_user: node\n", func(s *Stack) bool { return s.InstallUser == "node" }, ""},
		{"no digest", head + "    install: {path: install.sh}\n", nil, `missing required key "sha256"`},
		{"no path", head + "    install: {sha256: " + sum + "}\n", nil, `missing required key "path"`},
		{"a list", head + "    install: [install.sh]\n", nil, "must be a mapping"},
		{"a misspelt key", head + "    install: {path: install.sh, sha265: " + sum + "}\n", nil, `did you mean "sha256"`},
		{"a bad digest", head + "    install: {path: install.sh, sha256: abc}\n", nil, "install: " + filepath.Join(dir, "install.sh") + ": sha256 must be sha256:<64 hex digits>"},
		{"a user without a script", head + "    install_user: node\n", nil, "install_user and install_timeout_sec need an install script"},
		{"a bad user", head + "    install: {path: install.sh, sha256: " + sum + "}\n    install_user: \"a b\"\n", nil, `install_user: "a b" is not a user name`},
		{"a user of two colons", head + "    install: {path: install.sh, sha256: " + sum + "}\n    install_user: \"1:2:3\"\n", nil, "is not a user name or uid[:gid]"},
		{"a zero timeout", head + "    install: {path: install.sh, sha256: " + sum + "}\n    install_timeout_sec: 0\n", nil, "install_timeout_sec: must be more than 0"},
		{"a timeout as text", head + "    install: {path: install.sh, sha256: " + sum + "}\n    install_timeout_sec: ten\n", nil, "must be a number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, err := parseDoc(t, c.doc, dir)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "f.yaml:") {
					t.Fatalf("%v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st := set["g"]; st == nil || !c.want(st) {
				t.Fatalf("%+v", st)
			}
		})
	}
}

// TestInstallScript: the script is read and checked against its digest
// (Verify checks it too, naming the file); it runs from InstallDir, mode
// 0755; the stack's digest covers it and its user, and is unchanged for a
// stack without one.
func TestInstallScript(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "install.sh")
	script := []byte("#!/bin/sh\necho installing\n")
	os.WriteFile(path, script, 0o644)
	st := &Stack{Name: "g", Command: []string{"/usr/local/bin/g"}}
	plain := st.Digest()
	st.Install = &File{Path: path, SHA256: digestOf(script)}
	f, err := st.InstallScript()
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != "/opt/troupe-install/g/install" || f.Mode != 0o755 || string(f.Data) != string(script) {
		t.Errorf("%s %v %q", f.Path, f.Mode, f.Data)
	}
	if _, err := st.Verify(); err != nil {
		t.Error(err)
	}
	withScript := st.Digest()
	st.InstallUser = "node"
	withUser := st.Digest()
	st.InstallTimeout = time.Minute
	if plain == withScript || withScript == withUser || st.Digest() != withUser {
		t.Errorf("digests: without %s, with the script %s, with its user %s, with a timeout %s", plain, withScript, withUser, st.Digest())
	}
	// A stack without a script keeps the digest it had before scripts existed.
	if got := (&Stack{Name: "g", Command: []string{"/usr/local/bin/g"}}).Digest(); got != plain {
		t.Errorf("%s != %s", got, plain)
	}

	os.WriteFile(path, []byte("#!/bin/sh\necho changed\n"), 0o644)
	for _, err := range []error{func() error { _, err := st.InstallScript(); return err }(), func() error { _, err := st.Verify(); return err }()} {
		if err == nil || !strings.Contains(err.Error(), "stack g: install: "+path+" has sha256:") || !strings.Contains(err.Error(), "the script changed since it was pinned") {
			t.Errorf("a changed script: %v", err)
		}
	}
	st.Install = &File{Path: dir, SHA256: dirDigest(t, dir)}
	if _, err := st.InstallScript(); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("a folder: %v", err)
	}
	st.Install = &File{Path: filepath.Join(dir, "missing"), SHA256: digestOf(nil)}
	if _, err := st.Verify(); err == nil || !strings.Contains(err.Error(), "stack g: install: "+filepath.Join(dir, "missing")+" does not exist") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing script: %v", err)
	}
}
