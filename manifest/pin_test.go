package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/troupebench/troupe/internal/located"
)

// artifactDir writes files into a fresh artifact root.
func artifactDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	sumLead   = "3c3d6ba4e4b4c5ac8d2ffad7e9a2a4a1d3e1b0f6f4f5d6c7b8a9f0e1d2c3b4a5" // stale
	digestX   = pin
	leadBody  = "# Lead\n"
	leadSum   = "b1d36b5c1b1ffb4ee0f81d0b1e8f0c0b4e7ed8d9bb6ba1aa9d78f7d9b2d5f2f7"
	stalePins = `# A team (comments stay).
condition: pins
roster:
  - id: orch   # the lead
    kind: orchestrator
    role: lead
    count: 1
    endpoint: e
    model_revision: r
    prompt:
      path: lead.md
      sha256: ` + sumLead + `   # stale
  - id: w
    kind: worker
    role: implementer
    count: 1
    endpoint: e
    model_revision: r
    prompt: {path: x.md, sha256: "` + sumLead + `"}
    persona: {path: x.md}
    skills:
      - path: x.md
      - {path: "troupe:solo", sha256: TODO}
      - path: lead.md
        sha256:
prices: {e: {input_per_million_usd: 0, cached_input_per_million_usd: 0, output_per_million_usd: 0}}
trial_budget: {timeout_seconds: 60}
`
)

func TestRepin(t *testing.T) {
	dir := artifactDir(t, map[string]string{"lead.md": leadBody, "x.md": "x"})
	builtin := fstest.MapFS{"solo.md": {Data: []byte("x")}}
	src := Sources{Dir: dir, Builtin: builtin}
	lead := digest([]byte(leadBody))

	out, changes, err := Repin("m.yaml", []byte(stalePins), src)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer(
		"sha256: "+sumLead+"   # stale", "sha256: "+lead+"   # stale",
		`sha256: "`+sumLead+`"`, `sha256: "`+digestX+`"`,
		"persona: {path: x.md}", "persona: {path: x.md, sha256: "+digestX+"}",
		"      - path: x.md\n", "      - path: x.md\n        sha256: "+digestX+"\n",
		"sha256: TODO", "sha256: "+digestX,
		"        sha256:\n", "        sha256: "+lead+"\n",
	).Replace(stalePins)
	if string(out) != want {
		t.Errorf("rewritten manifest differs.\n--- got\n%s\n--- want\n%s", out, want)
	}
	if len(changes) != 6 {
		t.Errorf("want 6 changes, got %d: %+v", len(changes), changes)
	}
	if c := changes[0]; c.Key != "roster[0].prompt" || c.Old != sumLead || c.New != lead || c.Line != 12 {
		t.Errorf("first change %+v", c)
	}

	m, err := Parse("m.yaml", out)
	if err != nil {
		t.Fatalf("the repinned manifest does not parse: %v", err)
	}
	if _, err := m.Verify(src); err != nil {
		t.Fatalf("the repinned manifest does not verify: %v", err)
	}
	again, changes, err := Repin("m.yaml", out, src)
	if err != nil || len(changes) != 0 || string(again) != string(out) {
		t.Errorf("repinning a pinned manifest changed it: %v %+v", err, changes)
	}
}

func TestRepinKeepsLineEndingsAndBOM(t *testing.T) {
	dir := artifactDir(t, map[string]string{"x.md": "x"})
	doc := "\ufeffroster:\r\n  - prompt:\r\n      path: x.md\r\n"
	out, _, err := Repin("m.yaml", []byte(doc), Sources{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := "\ufeffroster:\r\n  - prompt:\r\n      path: x.md\r\n      sha256: " + digestX + "\r\n"
	if string(out) != want {
		t.Errorf("got %q\nwant %q", out, want)
	}
}

func TestRepinSharedAnchor(t *testing.T) {
	dir := artifactDir(t, map[string]string{"x.md": "x"})
	doc := "roster:\n  - prompt: &p {path: x.md, sha256: old}\n  - prompt: *p\n"
	out, changes, err := Repin("m.yaml", []byte(doc), Sources{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || !strings.Contains(string(out), "&p {path: x.md, sha256: "+digestX+"}\n  - prompt: *p") {
		t.Errorf("anchor not rewritten once: %+v\n%s", changes, out)
	}
}

func TestRepinReportsUnreadableFiles(t *testing.T) {
	dir := artifactDir(t, map[string]string{"lead.md": leadBody})
	_, _, err := Repin("m.yaml", []byte(stalePins), Sources{Dir: dir})
	errs, ok := errors.AsType[located.List](err)
	if !ok {
		t.Fatalf("got %v", err)
	}
	// x.md is missing (three references) and no built-in personas are given.
	if len(errs) != 4 {
		t.Errorf("want 4 located errors, got:\n%v", err)
	}
	if !strings.Contains(err.Error(), "m.yaml:19:20: roster[1].prompt.path: x.md does not exist under the artifact root") {
		t.Errorf("missing file not located at its path:\n%v", err)
	}
}

func TestVerify(t *testing.T) {
	lead := digest([]byte(leadBody))
	doc := strings.NewReplacer("sha256: "+sumLead+"   # stale", "sha256: "+lead).Replace(stalePins)
	doc = strings.Replace(doc, `sha256: "`+sumLead+`"`, "sha256: "+digestX, 1)
	doc = strings.Replace(doc, "persona: {path: x.md}", "persona: {path: x.md, sha256: "+digestX+"}", 1)
	doc = strings.Replace(doc, "      - path: x.md\n", "      - {path: x.md, sha256: "+digestX+"}\n", 1)
	doc = strings.Replace(doc, "sha256: TODO", "sha256: "+digestX, 1)
	doc = strings.Replace(doc, "        sha256:\n", "        sha256: "+lead+"\n", 1)
	m, err := Parse("m.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	src := Sources{Dir: artifactDir(t, map[string]string{"lead.md": leadBody, "x.md": "x"}), Builtin: fstest.MapFS{"solo.md": {Data: []byte("x")}}}
	team, err := m.Verify(src)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range team.Agents {
		ids = append(ids, a.ID)
	}
	if strings.Join(ids, ",") != "orch-1,w-1" || string(team.Agents[0].Prompt) != leadBody || string(team.Agents[1].Prompt) != "x" {
		t.Errorf("unexpected team %v %q", ids, team.Agents[0].Prompt)
	}
	if team.Orchestrator().Kind != Orchestrator || len(team.Files) != 3 {
		t.Errorf("orchestrator %+v, files %d", team.Orchestrator(), len(team.Files))
	}

	// The file changes after pinning: the error names both digests and the fix.
	if err := os.WriteFile(filepath.Join(src.Dir, "lead.md"), []byte("# Lead, edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = m.Verify(src)
	if err == nil || !strings.Contains(err.Error(), "m.yaml:12:15: roster[0].prompt.sha256: lead.md does not match its pin: the manifest pins "+lead+", the file has "+digest([]byte("# Lead, edited\n"))+"; if the change is intended, run: troupe pin m.yaml") {
		t.Errorf("stale pin not reported as expected:\n%v", err)
	}
}

func TestVerifyPaths(t *testing.T) {
	outside := artifactDir(t, map[string]string{"secret.md": "x"})
	root := artifactDir(t, map[string]string{"sub/ok.md": "x"})
	if err := os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(root, "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "dir.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, want string }{
		{"sub/ok.md", ""},
		{"../secret.md", "leaves the artifact root"},
		{"link.md", "cannot read link.md"},
		{"/etc/hostname", "absolute path"},
		{"dir.md", "not a regular file"},
		{"missing.md", "does not exist"},
		{"troupe:solo", "no built-in persona"},
	}
	for _, tt := range tests {
		doc := strings.Replace(baseManifest, "{path: lead.md,", "{path: \""+tt.path+"\",", 1)
		doc = strings.Replace(doc, "{path: worker.md,", "{path: sub/ok.md,", 1)
		m, err := Parse("m.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Verify(Sources{Dir: root, Builtin: fstest.MapFS{}})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.path, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want an error saying %q", tt.path, err, tt.want)
		}
	}
}

// TestRepinForms covers the ways a digest can be written, or be missing.
func TestRepinForms(t *testing.T) {
	dir := artifactDir(t, map[string]string{"x.md": "x"})
	tests := []struct{ in, want string }{
		{"roster:\n  - prompt: {path: x.md, sha256: }\n", "roster:\n  - prompt: {path: x.md, sha256: " + digestX + "}\n"},
		{"roster:\n  - prompt: {path: x.md, sha256: 'ab''c'}\n", "roster:\n  - prompt: {path: x.md, sha256: '" + digestX + "'}\n"},
		{"roster:\n  - prompt: {sha256: \"a\\\"b\", path: 'x.md'}\n", "roster:\n  - prompt: {sha256: \"" + digestX + "\", path: 'x.md'}\n"},
		{"roster:\n  - prompt:\n      sha256: ~\n      path: x.md # c\n", "roster:\n  - prompt:\n      sha256: " + digestX + "\n      path: x.md # c\n"},
		{"roster:\n  - prompt:\n      path: \"x.md\"  # c\n  - x\n", "roster:\n  - prompt:\n      path: \"x.md\"  # c\n      sha256: " + digestX + "\n  - x\n"},
		{"roster:\n  - prompt: {path: x.md}\n", "roster:\n  - prompt: {path: x.md, sha256: " + digestX + "}\n"},
		{"roster:\n  - prompt:\n      path: x.md\n      sha256:", "roster:\n  - prompt:\n      path: x.md\n      sha256: " + digestX},
	}
	for _, tt := range tests {
		out, _, err := Repin("m.yaml", []byte(tt.in), Sources{Dir: dir})
		if err != nil || string(out) != tt.want {
			t.Errorf("%q:\n got %q %v\nwant %q", tt.in, out, err, tt.want)
		}
	}
}
