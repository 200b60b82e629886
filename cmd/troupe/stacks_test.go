package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/stack"
)

func digest(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

// folderDigest is what a stack pins for a folder.
func folderDigest(t *testing.T, dir string) string {
	t.Helper()
	d, err := stack.HostDigest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStacksCommands: list, show and check a stack defined in the config
// file; check names a file that changed and a program built for another
// architecture.
func TestStacksCommands(t *testing.T) {
	dir := isolate(t)
	script := []byte("#!/bin/sh\nexec /opt/troupe/bin/troupe agent\n")
	write(t, filepath.Join(dir, "bin", "run.sh"), string(script))
	config := filepath.Join(dir, "troupe.yaml")
	write(t, config, "stacks:\n  plain:\n    command: [/opt/plain/run.sh]\n    files:\n      - {path: bin/run.sh, to: /opt/plain/run.sh, mode: \"0755\", sha256: "+digest(script)+"}\n    env: {MY_TOKEN: token}\n    fixed_env: {PLAIN: \"1\"}\n")

	code, out, errOut := troupe(t, "stacks", "list", "--config", config)
	if code != exitOK || !strings.Contains(out, "plain") || !strings.Contains(out, "troupe-agent") || !strings.Contains(out, config) {
		t.Errorf("list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = troupe(t, "stacks", "show", "plain", "--config", config)
	for _, want := range []string{"command:    /opt/plain/run.sh", "-> /opt/plain/run.sh (mode 0755, " + digest(script), "env:        MY_TOKEN = the contract's token", "fixed env:  PLAIN=1"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = troupe(t, "stacks", "check", "plain", "--config", config)
	if code != exitOK || !strings.Contains(out, "ok    command: /opt/plain/run.sh is uploaded") || !strings.Contains(out, "stack plain can run") {
		t.Errorf("check: exit %d\n%s%s", code, out, errOut)
	}
	// A stack whose install script provides its command.
	install := []byte("#!/bin/sh\nprintf '#!/bin/sh\\n' > /usr/local/bin/my-agent\n")
	write(t, filepath.Join(dir, "bin", "install.sh"), string(install))
	installed := filepath.Join(dir, "installed.yaml")
	write(t, installed, "stacks:\n  inst:\n    command: [/usr/local/bin/my-agent]\n    install: {path: bin/install.sh, sha256: "+digest(install)+"}\n    install_timeout_sec: 30\n")
	code, out, errOut = troupe(t, "stacks", "show", "inst", "--config", installed)
	if code != exitOK || !strings.Contains(out, "install:    "+filepath.Join(dir, "bin", "install.sh")) || !strings.Contains(out, "as root, within 30s") {
		t.Errorf("show with an install script: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = troupe(t, "stacks", "check", "inst", "--config", installed)
	if code != exitOK || !strings.Contains(out, "the install script must put it there") {
		t.Errorf("check with an install script: exit %d\n%s", code, out)
	}
	code, _, errOut = troupe(t, "stacks", "check", "goose", "--config", config)
	if code != exitFailed || !strings.Contains(errOut, `harness "goose" names no stack (defined: plain`) {
		t.Errorf("an undefined stack: exit %d: %s", code, errOut)
	}

	write(t, filepath.Join(dir, "bin", "run.sh"), string(script)+"# changed\n")
	code, _, errOut = troupe(t, "stacks", "check", "plain", "--config", config)
	if code != exitFailed || !strings.Contains(errOut, "bin/run.sh (resolved against "+dir+", the folder of "+config+": "+filepath.Join(dir, "bin", "run.sh")+") has sha256:") {
		t.Errorf("a changed file: exit %d: %s", code, errOut)
	}

	// A program built for arm64 cannot run in a linux/amd64 container.
	src := filepath.Join(dir, "arm", "main.go")
	write(t, src, "package main\n\nfunc main() {}\n")
	write(t, filepath.Join(dir, "arm", "go.mod"), "module arm\n\ngo 1.26\n")
	build := exec.Command("go", "build", "-o", "agent", ".")
	build.Dir = filepath.Dir(src)
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build for arm64: %v\n%s", err, out)
	}
	bin, _ := os.ReadFile(filepath.Join(dir, "arm", "agent"))
	write(t, config, "stacks:\n  arm:\n    command: [/opt/arm/agent]\n    files:\n      - {path: arm/agent, to: /opt/arm/agent, mode: \"0755\", sha256: "+digest(bin)+"}\n")
	code, _, errOut = troupe(t, "stacks", "check", "arm", "--config", config)
	if code != exitFailed || !strings.Contains(errOut, "/opt/arm/agent is an ELF program for AARCH64: trial containers are linux/amd64") {
		t.Errorf("an arm64 program: exit %d: %s", code, errOut)
	}
}

// TestRunRefusesAnUndefinedHarness: the original's goose manifest loads,
// and troupe run refuses it before anything starts until a goose stack is
// defined, saying how.
func TestRunRefusesAnUndefinedHarness(t *testing.T) {
	root, _ := filepath.Abs("../..")
	dir := isolate(t)
	doc, err := os.ReadFile(filepath.Join(root, "manifest/testdata/hash/tb-harness-goose-terra-high.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The original's persona is not public: a stand-in, pinned.
	persona := "You are the solo agent.\n"
	write(t, filepath.Join(dir, "personas/bench/solo-harness-comparison.md"), persona)
	m := strings.Replace(string(doc), "5a3bea67549937b6590a6d5678261cbfa08f3da67cb891dee9e81d408a93730b", strings.TrimPrefix(digest([]byte(persona)), "sha256:"), 1)
	write(t, filepath.Join(dir, "goose.yaml"), m)
	code, _, errOut := troupe(t, "run", filepath.Join(dir, "goose.yaml"), "--tasks", filepath.Join(root, "examples/tasks/hello-world"))
	if code != exitFailed || !strings.Contains(errOut, `goose.yaml: roster[0].harness: harness "goose" names no stack`) || !strings.Contains(errOut, "Define it under stacks:") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs")); err == nil {
		t.Error("a job folder was made for a refused run")
	}
	// Defined beside the manifest as troupe acp hosting a stand-in ACP
	// agent (examples/stacks/acp-hello), with its endpoint configured, the
	// manifest passes pre-flight; nothing starts.
	bin := filepath.Join(dir, "bin", "acp-hello")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./examples/stacks/acp-hello")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in: %v\n%s", err, out)
	}
	data, _ := os.ReadFile(bin)
	write(t, filepath.Join(dir, "stacks.yaml"), "stacks:\n  goose:\n    command: [/opt/troupe/bin/troupe, acp, --, /opt/goose/goose]\n    files:\n      - {path: bin/acp-hello, to: /opt/goose/goose, mode: \"0755\", sha256: "+digest(data)+"}\n    env: {OPENAI_API_KEY: token, OPENAI_BASE_URL: llm_base_url}\n")
	config := filepath.Join(dir, "troupe.yaml")
	write(t, config, "endpoints:\n  gpt-5.6-terra: {api: mock, scenario: hello-solo}\n")
	code, out, errOut := troupe(t, "run", "--config", config, filepath.Join(dir, "goose.yaml"), "--tasks", filepath.Join(root, "examples/tasks/hello-world"), "--dry-run")
	if code != exitOK || !strings.Contains(out, "pre-flight passed: 1 trials") {
		t.Errorf("with goose defined beside the manifest: exit %d: %s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs")); err == nil {
		t.Error("a dry run made a job folder")
	}
	// A changed stand-in is refused by the same pre-flight, naming it.
	os.WriteFile(bin, append(data, 0), 0o755)
	code, _, errOut = troupe(t, "run", "--config", config, filepath.Join(dir, "goose.yaml"), "--tasks", filepath.Join(root, "examples/tasks/hello-world"), "--dry-run")
	if code != exitFailed || !strings.Contains(errOut, bin+") has sha256:") {
		t.Errorf("a changed stand-in: exit %d: %s", code, errOut)
	}
}

// TestStacksCheckSaysWhatARelativePathIsResolvedAgainst: a stack's
// relative file that is missing is named with the folder it was looked
// for in; a relative command with the working folder it would run from.
func TestStacksCheckSaysWhatARelativePathIsResolvedAgainst(t *testing.T) {
	dir := isolate(t)
	write(t, filepath.Join(dir, "bench", "m.yaml"), "")
	for _, c := range []struct {
		name, stacks, want string
	}{
		{"a missing file", "stacks:\n  s:\n    command: [/opt/s/agent]\n    files:\n      - {path: ./dist/agent, to: /opt/s/agent, sha256: \"" + digest(nil) + "\"}\n",
			"stack s: ./dist/agent (resolved against " + filepath.Join(dir, "bench") + ", the folder of bench/stacks.yaml: " + filepath.Join(dir, "bench", "dist", "agent") + ") does not exist"},
		{"a missing install script", "stacks:\n  s:\n    command: [/opt/s/agent]\n    install: {path: ../install.sh, sha256: \"" + digest(nil) + "\"}\n",
			"stack s: install: ../install.sh (resolved against " + filepath.Join(dir, "bench") + ", the folder of bench/stacks.yaml: " + filepath.Join(dir, "install.sh") + ") does not exist"},
		{"a relative command", "stacks:\n  s:\n    command: [dist/agent]\n",
			"command: dist/agent is a relative path, which the container resolves against the task's working folder (TROUPE_WORKDIR, such as /app), not against " + filepath.Join(dir, "bench") + ", the folder of bench/stacks.yaml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			write(t, filepath.Join(dir, "bench", "stacks.yaml"), c.stacks)
			code, out, errOut := troupe(t, "stacks", "check", "s", "--manifest", "bench/m.yaml")
			if code != exitFailed || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d\n%s%s\nwant %s", code, out, errOut, c.want)
			}
		})
	}
}
