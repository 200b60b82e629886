package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHashPrintsWhatAStackPins: troupe hash prints, for a file of 3 MiB (over
// the manifest loader's limit) and for a folder, the digests a stack's
// check accepts: pinned as printed, the stack passes troupe stacks check.
// A manifest keeps its condition hash; --file takes a .yaml file as a
// stack's file.
func TestHashPrintsWhatAStackPins(t *testing.T) {
	golden := repoPath(t, "manifest/testdata/hash/tb-team-opus-luna.yaml")
	dir := isolate(t)
	big := bytes.Repeat([]byte("\x7fELF-not-really\x00"), 3<<20/16+1)
	write(t, filepath.Join(dir, "dist", "agent.tar.gz"), string(big))
	write(t, filepath.Join(dir, "dist", "tree", "bin", "run"), "#!/bin/sh\n")
	os.Chmod(filepath.Join(dir, "dist", "tree", "bin", "run"), 0o755)
	write(t, filepath.Join(dir, "dist", "tree", "README"), "a tree\n")
	write(t, filepath.Join(dir, "dist", "agent.yaml"), "model: x\n")

	hash := func(args ...string) string {
		t.Helper()
		code, out, errOut := troupe(t, append([]string{"hash"}, args...)...)
		if code != exitOK {
			t.Fatalf("hash %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	pin := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	file, folder, yml := hash("dist/agent.tar.gz"), hash("dist/tree"), hash("--file", "dist/agent.yaml")
	for _, d := range []string{file, folder, yml} {
		if !pin.MatchString(d) {
			t.Errorf("%q is not sha256:<64 hex>", d)
		}
	}
	if file != digest(big) {
		t.Errorf("the file's digest %s is not the sha256 of its bytes", file)
	}
	if out := hash("dist/agent.tar.gz", "dist/tree"); out != file+"  dist/agent.tar.gz\n"+folder+"  dist/tree" {
		t.Errorf("two paths: %q", out)
	}

	write(t, filepath.Join(dir, "stacks.yaml"), "stacks:\n  mine:\n    command: [/opt/mine/tree/bin/run]\n    files:\n"+
		"      - {path: dist/agent.tar.gz, to: /opt/mine/agent.tar.gz, sha256: \""+file+"\"}\n"+
		"      - {path: dist/tree, to: /opt/mine/tree, sha256: \""+folder+"\"}\n"+
		"      - {path: dist/agent.yaml, to: /opt/mine/agent.yaml, sha256: \""+yml+"\"}\n")
	write(t, filepath.Join(dir, "m.yaml"), "")
	if code, out, errOut := troupe(t, "stacks", "check", "mine", "--manifest", "m.yaml"); code != exitOK || !strings.Contains(out, "3 files match their digests") {
		t.Errorf("the printed digests do not pass the stack's check: exit %d\n%s%s", code, out, errOut)
	}

	// A .yaml file is a manifest unless --file says otherwise.
	code, _, errOut := troupe(t, "hash", "dist/agent.yaml")
	if code != exitFailed || !strings.Contains(errOut, "troupe hash --file dist/agent.yaml prints the digest a stack pins") {
		t.Errorf("a .yaml that is no manifest: exit %d: %s", code, errOut)
	}
	if got := hash(golden); got != "bb819cba47db47970686599cd0afb84f354933c7d8542f94af8d04c640caf1a0" {
		t.Errorf("a manifest's condition hash: %s", got)
	}
	if got := hash("--file", golden); !pin.MatchString(got) {
		t.Errorf("--file on a manifest: %s", got)
	}
	if code, _, errOut := troupe(t, "hash", "--canonical", "dist/tree"); code != exitFailed || !strings.Contains(errOut, "dist/tree: is not a manifest") {
		t.Errorf("--canonical of a folder: exit %d: %s", code, errOut)
	}
	if code, _, errOut := troupe(t, "hash", "nothing.bin"); code != exitFailed || !strings.Contains(errOut, "nothing.bin: does not exist") {
		t.Errorf("a missing path: exit %d: %s", code, errOut)
	}
}

const stacksDoc = `# Stacks of this bench (this comment stays).
stacks:
  mine:
    command: [/opt/mine/bin/agent, --team]   # the upload
    files:
      - {path: dist/agent, to: /opt/mine/bin/agent, mode: "0755", sha256: "sha256:…"}
      - path: ./dist/lib
        to: /opt/mine/lib
    install: {path: install.sh, sha256: "sha256:…"}
    env: {MY_TOKEN: token}
`

// TestStacksPin: troupe stacks pin rewrites a stack's pins in the file
// that defines it, keeping the rest of the file, prints old -> new per
// path, says when nothing changed, and refuses the built-in stack, an
// undefined one and a missing file.
func TestStacksPin(t *testing.T) {
	dir := isolate(t)
	write(t, filepath.Join(dir, "dist", "agent"), "#!/bin/sh\necho v1\n")
	write(t, filepath.Join(dir, "dist", "lib", "l.txt"), "lib\n")
	write(t, filepath.Join(dir, "install.sh"), "#!/bin/sh\n")
	path := filepath.Join(dir, "stacks.yaml")
	write(t, path, stacksDoc)
	write(t, filepath.Join(dir, "m.yaml"), "")
	hash := func(p string) string {
		_, out, _ := troupe(t, "hash", "--file", p)
		return strings.TrimSpace(out)
	}
	agent, lib, install := hash("dist/agent"), hash("dist/lib"), hash("install.sh")

	code, out, _ := troupe(t, "stacks", "pin", "--check", "mine", "--manifest", "m.yaml")
	if code != exitFailed || !strings.Contains(out, "stale  stacks.yaml:6:75: stacks.mine.files[0] (dist/agent): sha256:… -> "+agent) {
		t.Errorf("--check: exit %d\n%s", code, out)
	}
	if data, _ := os.ReadFile(path); string(data) != stacksDoc {
		t.Fatal("--check wrote the file")
	}

	code, out, _ = troupe(t, "stacks", "pin", "mine", "--manifest", "m.yaml")
	for _, want := range []string{
		"updated  stacks.yaml:6:75: stacks.mine.files[0] (dist/agent): sha256:… -> " + agent + "\n",
		"updated  stacks.yaml:8:9: stacks.mine.files[1] (./dist/lib): (none) -> " + lib + "\n",
		"updated  stacks.yaml:9:41: stacks.mine.install (install.sh): sha256:… -> " + install + "\n",
	} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("pin: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
	wantDoc := strings.NewReplacer(
		`mode: "0755", sha256: "sha256:…"}`, `mode: "0755", sha256: "`+agent+`"}`,
		"        to: /opt/mine/lib\n", "        sha256: \""+lib+"\"\n        to: /opt/mine/lib\n",
		`{path: install.sh, sha256: "sha256:…"}`, `{path: install.sh, sha256: "`+install+`"}`,
	).Replace(stacksDoc)
	if data, _ := os.ReadFile(path); string(data) != wantDoc {
		t.Errorf("pinned file:\n%s\nwant:\n%s", data, wantDoc)
	}
	if code, out, _ = troupe(t, "stacks", "pin", "mine", "--manifest", "m.yaml"); code != exitOK || out != "ok    stacks.yaml  every pin of stack mine is current\n" {
		t.Errorf("pinning again: exit %d\n%s", code, out)
	}
	if code, out, errOut := troupe(t, "stacks", "check", "mine", "--manifest", "m.yaml"); code != exitOK {
		t.Errorf("the pinned stack does not check: exit %d\n%s%s", code, out, errOut)
	}

	// After a rebuild, only what changed is updated.
	write(t, filepath.Join(dir, "dist", "agent"), "#!/bin/sh\necho v2\n")
	code, out, _ = troupe(t, "stacks", "pin", "mine", "--manifest", "m.yaml")
	if code != exitOK || out != "updated  stacks.yaml:6:75: stacks.mine.files[0] (dist/agent): "+agent+" -> "+hash("dist/agent")+"\n" {
		t.Errorf("after a rebuild: exit %d\n%s", code, out)
	}

	// A stack of the config file is pinned there.
	config := filepath.Join(dir, "conf", "troupe.yaml")
	write(t, filepath.Join(dir, "conf", "bin", "agent"), "x")
	write(t, config, "# my config\nstacks:\n  conf:\n    command: [/opt/c/agent]\n    files: [{path: bin/agent, to: /opt/c/agent, sha256: \"sha256:…\"}]\n")
	code, out, _ = troupe(t, "stacks", "pin", "conf", "--config", config)
	if data, _ := os.ReadFile(config); code != exitOK || !strings.Contains(out, "updated  "+config+":5:") || !strings.Contains(string(data), "# my config\n") || !strings.Contains(string(data), digest([]byte("x"))) {
		t.Errorf("a stack of the config file: exit %d\n%s%s", code, out, data)
	}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"the built-in stack", []string{"troupe-agent"}, "troupe-agent is troupe's built-in reference agent, troupe's own binary: it has no files to pin"},
		{"an undefined stack", []string{"nobody", "--manifest", "m.yaml"}, "stack nobody is defined in neither stacks.yaml"},
		{"no file to look in", []string{"nobody"}, "no config file was found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := troupe(t, append([]string{"stacks", "pin"}, c.args...)...)
			if code != exitFailed || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d\n%s%s", code, out, errOut)
			}
		})
	}

	// A missing file is refused, naming what its path was resolved
	// against, and nothing is written.
	before, _ := os.ReadFile(path)
	os.RemoveAll(filepath.Join(dir, "dist", "lib"))
	code, out, _ = troupe(t, "stacks", "pin", "mine", "--manifest", "m.yaml")
	if data, _ := os.ReadFile(path); code != exitFailed || string(data) != string(before) ||
		!strings.Contains(out, "stacks.yaml:7:15: stacks.mine.files[1].path: ./dist/lib (resolved against "+dir+", the folder of stacks.yaml: "+filepath.Join(dir, "dist", "lib")+") does not exist") {
		t.Errorf("a missing folder: exit %d\n%s", code, out)
	}
}
