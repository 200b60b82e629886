package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/internal/yaml11"
)

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestResolve(t *testing.T) {
	goose := &Stack{Name: "goose", Command: []string{"/opt/goose"}}
	set := Set{"goose": goose}
	for _, name := range []string{"", BuzzAgent, Builtin} {
		if st, err := set.Resolve(name); err != nil || st.Name != Builtin {
			t.Errorf("%q: %v %v", name, st, err)
		}
	}
	if st, err := set.Resolve("goose"); err != nil || st != goose {
		t.Errorf("goose: %v %v", st, err)
	}
	_, err := set.Resolve("codex")
	if err == nil || !strings.Contains(err.Error(), `harness "codex" names no stack (defined: goose`) || !strings.Contains(err.Error(), "Define it under stacks:") {
		t.Errorf("codex: %v", err)
	}
}

// TestLaunch: every agent gets the contract; a stack maps values to its
// agent's names; fixed variables never replace identity.
func TestLaunch(t *testing.T) {
	st := &Stack{Name: "s", Command: []string{"/opt/s/run"},
		Env:      map[string]string{"OPENAI_API_KEY": ValueToken, "OPENAI_BASE_URL": ValueLLMBaseURL, "ANTHROPIC_BASE_URL": ValueLLMURL, "NOSTR_KEY": ValueKey},
		FixedEnv: map[string]string{"GOOSE_PROVIDER": "openai"}}
	v := contract.Values{AgentID: "worker-1", RelayURL: "ws://127.0.0.1:3600", Channel: "c1", LLMBaseURL: "http://127.0.0.1:3601/v1", Model: "m", Workdir: "/app", Deadline: time.Unix(0, 0)}
	cmd, env := st.Launch(v, "k3y", "t0ken")
	want := []string{
		"ANTHROPIC_BASE_URL=http://127.0.0.1:3601", "GOOSE_PROVIDER=openai", "HOME=/run/troupe/home/worker-1", "NOSTR_KEY=k3y",
		"OPENAI_API_KEY=t0ken", "OPENAI_BASE_URL=http://127.0.0.1:3601/v1",
		"TROUPE_AGENT_ID=worker-1", "TROUPE_CHANNEL=c1", "TROUPE_DEADLINE=1970-01-01T00:00:00Z", "TROUPE_LLM_BASE_URL=http://127.0.0.1:3601/v1",
		"TROUPE_LLM_TOKEN_FILE=/run/troupe/agents/worker-1/token", "TROUPE_MODEL=m", "TROUPE_PRIVATE_KEY_FILE=/run/troupe/agents/worker-1/key",
		"TROUPE_RELAY_URL=ws://127.0.0.1:3600", "TROUPE_SYSTEM_PROMPT_FILE=/run/troupe/agents/worker-1/system-prompt.md", "TROUPE_WORKDIR=/app",
	}
	if !slices.Equal(cmd, []string{"/opt/s/run"}) || !slices.Equal(env, want) {
		t.Errorf("cmd %v\nenv %v\nwant %v", cmd, env, want)
	}
	// A stack that was never checked still cannot set the contract's own
	// variables: Launch keeps troupe's.
	st.Env["HOME"] = ValueWorkdir
	st.Env["TROUPE_MODEL"] = ValuePromptFile
	st.FixedEnv["TROUPE_SYSTEM_PROMPT_FILE"] = "/opt/s/prompt.md"
	st.FixedEnv["HOME"] = "/app"
	st.FixedEnv["OPENAI_API_KEY"] = "sk-real"
	if _, env := st.Launch(v, "k3y", "t0ken"); !slices.Equal(env, want) {
		t.Errorf("an unchecked stack changed the contract:\nenv %v\nwant %v", env, want)
	}
}

// TestCheck: what a stack may not do is refused, naming the variable or
// the file.
func TestCheck(t *testing.T) {
	ok := func() *Stack {
		return &Stack{Name: "s", Source: "f.yaml", Command: []string{"/opt/s/run"}, Env: map[string]string{"OPENAI_API_KEY": ValueToken},
			Files: []File{{Path: "/h/run", To: "/opt/s/run", SHA256: "sha256:" + strings.Repeat("a", 64)}}}
	}
	if err := ok().Check(); err != nil {
		t.Fatal(err)
	}
	// A setting of troupe's own tool that the stack runs is the stack's.
	acp := ok()
	acp.FixedEnv = map[string]string{"TROUPE_ACP_PERMISSION": "allow"}
	if err := acp.Check(); err != nil {
		t.Errorf("troupe acp's setting refused: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(*Stack)
		want   string
	}{
		{"identity variable", func(s *Stack) { s.FixedEnv = map[string]string{"TROUPE_PRIVATE_KEY_FILE": "/tmp/k"} }, "fixed_env: TROUPE_PRIVATE_KEY_FILE is the contract's own"},
		{"relay", func(s *Stack) { s.FixedEnv = map[string]string{"TROUPE_RELAY_URL": "ws://elsewhere"} }, "TROUPE_RELAY_URL is the contract's own"},
		{"home", func(s *Stack) { s.FixedEnv = map[string]string{"HOME": "/root"} }, "HOME is the contract's own"},
		{"the pinned persona", func(s *Stack) { s.FixedEnv = map[string]string{"TROUPE_SYSTEM_PROMPT_FILE": "/opt/s/prompt.md"} }, "fixed_env: TROUPE_SYSTEM_PROMPT_FILE is the contract's own"},
		{"the model", func(s *Stack) { s.FixedEnv = map[string]string{"TROUPE_MODEL": "gpt-5"} }, "TROUPE_MODEL is the contract's own"},
		{"the generation settings", func(s *Stack) { s.FixedEnv = map[string]string{"TROUPE_THINKING_EFFORT": "high"} }, "TROUPE_THINKING_EFFORT is the contract's own"},
		{"home mapped to the shared folder", func(s *Stack) { s.Env["HOME"] = ValueWorkdir }, "env: HOME is the contract's own"},
		{"the persona mapped", func(s *Stack) { s.Env["TROUPE_SYSTEM_PROMPT_FILE"] = ValueWorkdir }, "env: TROUPE_SYSTEM_PROMPT_FILE is the contract's own"},
		{"a mapped token", func(s *Stack) { s.FixedEnv = map[string]string{"OPENAI_API_KEY": "sk-real"} }, "fixed_env: OPENAI_API_KEY is also mapped from the agent's token"},
		{"a mapped value", func(s *Stack) { s.Env["MODEL"] = ValueModel; s.FixedEnv = map[string]string{"MODEL": "other"} }, "fixed_env: MODEL is also mapped"},
		{"unknown value", func(s *Stack) { s.Env["X"] = "password" }, `env: X maps "password", which is not a contract value`},
		{"no command", func(s *Stack) { s.Command = nil }, "command is empty"},
		{"relative to", func(s *Stack) { s.Files[0].To = "opt/s/run" }, "must be an absolute, clean path"},
		{"troupe's folder", func(s *Stack) { s.Files[0].To = "/run/troupe/agents/x" }, "is troupe's own"},
		{"bad digest", func(s *Stack) { s.Files[0].SHA256 = "abc" }, "sha256 must be sha256:<64 hex digits>"},
		{"relative skills", func(s *Stack) { s.Skills = ".claude/skills" }, `skills: ".claude/skills" must be an absolute, clean path or one under ~/`},
		{"unclean skills", func(s *Stack) { s.Skills = "~/../../etc" }, "must be an absolute, clean path"},
		{"skills in troupe's folder", func(s *Stack) { s.Skills = "/run/troupe/agents/x" }, "skills: /run/troupe/agents/x is troupe's own"},
	} {
		s := ok()
		c.change(s)
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// A stack's skills folder is the agent's HOME's or absolute; naming one
// changes the stack's digest, and not naming one keeps the digest it had.
func TestSkills(t *testing.T) {
	base := &Stack{Name: "s", Source: "f.yaml", Command: []string{"/opt/s/run"}}
	before := base.Digest()
	for _, c := range []struct{ skills, want string }{
		{"", ""},
		{"~/.claude/skills", "/run/troupe/home/a-1/.claude/skills"},
		{"~", "/run/troupe/home/a-1"},
		{"/opt/skills/", "/opt/skills"},
	} {
		s := *base
		s.Skills = c.skills
		if err := s.Check(); err != nil {
			t.Errorf("%q: %v", c.skills, err)
		}
		if got := s.SkillsIn("/run/troupe/home/a-1"); got != c.want {
			t.Errorf("%q: in %q, want %q", c.skills, got, c.want)
		}
		if (s.Digest() == before) != (c.skills == "") {
			t.Errorf("%q: digest %s, before %s", c.skills, s.Digest(), before)
		}
	}
}

// TestVerify: files and folders are read and checked against their
// digests; a changed file is named; the digest of the stack follows its
// files.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.WriteFile(bin, []byte("#!/bin/sh\necho hi\n"), 0o755)
	lib := filepath.Join(dir, "lib")
	os.MkdirAll(filepath.Join(lib, "sub"), 0o755)
	os.WriteFile(filepath.Join(lib, "sub", "a.txt"), []byte("a"), 0o644)
	data, _ := os.ReadFile(bin)
	files := func() []File {
		return []File{{Path: bin, To: "/opt/s/bin", Mode: 0o755, SHA256: digestOf(data)}, {Path: lib, To: "/opt/s/lib", SHA256: dirDigest(t, lib)}}
	}
	st := &Stack{Name: "s", Command: []string{"/opt/s/bin"}, Files: files()}
	got, err := st.Verify()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range got {
		paths = append(paths, f.Path)
	}
	if !slices.Equal(paths, []string{"/opt/s/bin", "/opt/s/lib", "/opt/s/lib/sub", "/opt/s/lib/sub/a.txt"}) || got[0].Mode != 0o755 {
		t.Errorf("files %v, mode %v", paths, got[0].Mode)
	}
	before := st.Digest()
	os.WriteFile(filepath.Join(lib, "sub", "a.txt"), []byte("changed"), 0o644)
	if _, err := st.Verify(); err == nil || !strings.Contains(err.Error(), lib+" has sha256:") {
		t.Errorf("a changed folder: %v", err)
	}
	st.Files[1].SHA256 = dirDigest(t, lib)
	if st.Digest() == before {
		t.Error("the stack's digest did not follow its files")
	}
}

func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	d, _, err := read(File{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestParse: a stacks file, with every problem located.
func TestParse(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "run"), []byte("x"), 0o755)
	good := "stacks:\n  goose:\n    command: [/opt/goose/goose, acp]\n    skills: ~/.config/goose/skills\n    files:\n      - {path: run, to: /opt/goose/goose, mode: \"0755\", sha256: " + digestOf([]byte("x")) + "}\n    env: {OPENAI_API_KEY: token}\n    fixed_env: {GOOSE_PROVIDER: openai}\n"
	path := filepath.Join(dir, FileName)
	os.WriteFile(path, []byte(good), 0o644)
	set, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := set["goose"]
	if g == nil || g.Skills != "~/.config/goose/skills" || g.Files[0].Path != filepath.Join(dir, "run") || g.Files[0].Mode != 0o755 || g.Source != path || g.Env["OPENAI_API_KEY"] != ValueToken {
		t.Fatalf("%+v", g)
	}
	if _, err := g.Verify(); err != nil {
		t.Error(err)
	}
	for _, c := range []struct{ doc, want string }{
		{"stacks:\n  Goose:\n    command: [x]\n", `found "Goose"`},
		{"stacks:\n  buzz-agent:\n    command: [x]\n", "cannot be redefined"},
		{"stacks:\n  g:\n    comand: [x]\n", `did you mean "command"`},
		{"stacks:\n  g:\n    command: [x]\n    files:\n      - {path: a, to: /a, sha256: x, mode: \"rwx\"}\n", `must be an octal mode`},
		{"stacks:\n  g:\n    command: [x]\n    fixed_env: {TROUPE_CHANNEL: c}\n", "TROUPE_CHANNEL is the contract's own"},
	} {
		d := yaml11.Decoder{File: "f.yaml"}
		root, err := yaml11.Parse("f.yaml", []byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		d.Struct(root, "", []yaml11.Field{{Name: "stacks", Decode: func(n *yaml11.Node, p string) { Parse(&d, n, p, dir, "f.yaml") }}}, nil)
		if err := d.Err(); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "f.yaml:") {
			t.Errorf("%q: %v, want %q", c.doc, err, c.want)
		}
	}
	if _, err := Merge(set, Set{"goose": {Name: "goose", Source: "other.yaml", Command: []string{"y"}}}); err == nil || !strings.Contains(err.Error(), "defined twice, differently") {
		t.Errorf("merge: %v", err)
	}
	if s, err := LoadFile(filepath.Join(dir, "none.yaml")); err != nil || len(s) != 0 {
		t.Errorf("a missing file: %v %v", s, err)
	}
}

func TestELFMachine(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(self)
	if m := ELFMachine(data); m != "EM_X86_64" {
		t.Errorf("this test binary: %q", m)
	}
	if m := ELFMachine([]byte("#!/bin/sh\n")); m != "" {
		t.Errorf("a script: %q", m)
	}
}

// FuzzParse: whatever a stacks file holds, it is a set of checked stacks
// or located errors, never a panic; a stack that parses passes Check.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"stacks:\n  goose:\n    command: [/opt/goose/goose, acp]\n    env: {OPENAI_API_KEY: token}\n",
		"stacks:\n  g:\n    command: [x]\n    files:\n      - {path: a, to: /a, sha256: sha256:00, mode: \"0755\"}\n",
		"stacks: {}\n", "stacks:\n  x: 1\n", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		root, err := yaml11.Parse("f.yaml", []byte(doc))
		if err != nil || yaml11.IsNull(root) {
			return
		}
		d := yaml11.Decoder{File: "f.yaml"}
		var set Set
		d.Struct(root, "", []yaml11.Field{{Name: "stacks", Decode: func(n *yaml11.Node, p string) { set = Parse(&d, n, p, "/tmp", "f.yaml") }}}, nil)
		for name, st := range set {
			if err := st.Check(); err != nil || st.Name != name {
				t.Fatalf("%s parsed but does not check: %v", name, err)
			}
		}
	})
}
