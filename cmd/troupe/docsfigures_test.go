package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsTaskFigures: the figures docs/run.md types about the
// repository's own tasks are what troupe says today: the summary line of
// troupe tasks load for examples/tasks and for the trials' fixtures (in
// an environment without the variables the tests set), and the digests
// its dry-run example abbreviates (hello-world's, the built-in stack's,
// the example manifest's and its image's name on a cluster). When they
// differ the test prints the lines to paste.
func TestDocsTaskFigures(t *testing.T) {
	root := repoPath(t, "")
	isolate(t)
	for _, k := range []string{"TROUPE_TEST_HOSTVAL", "TROUPE_TEST_HOST_DIR"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs/run.md"))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	want.WriteString("```text\n")
	for _, set := range []string{"examples/tasks", "trial/testdata/tasks"} {
		var out bytes.Buffer
		runTasksLoad(&out, tasksLoadOptions{paths: []string{filepath.Join(root, set)}}) // a refused fixture is expected
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		want.WriteString("$ troupe tasks load " + set + "\n" + lines[len(lines)-1] + "\n")
	}
	want.WriteString("```\n")
	block := regexp.MustCompile("(?s)<!-- tasks-load: [^\n]*-->\n(```text\n.*?```\n)").FindSubmatch(doc)
	if block == nil || string(block[1]) != want.String() {
		t.Errorf("docs/run.md's task counts (after <!-- tasks-load: … -->) are not what troupe tasks load says; paste:\n%s", want.String())
	}

	code, out, errOut := troupe(t, "run", filepath.Join(root, "examples/manifests/solo.yaml"), "--tasks", filepath.Join(root, "examples/tasks/hello-world"), "--dry-run")
	if code != exitOK {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []struct{ what, live, doc string }{
		{"the manifest's hash", `hello-solo-mock +\S+ +([0-9a-f]{12})`, `hello-solo-mock  examples/manifests/solo.yaml  ([0-9a-f]+)…`},
		{"hello-world's digest", `hello-world +\S+ +sha256:([0-9a-f]{8})`, `hello-world  examples/tasks/hello-world  sha256:([0-9a-f]+)…`},
		{"the built-in stack's digest", `troupe-agent +built in +sha256:([0-9a-f]{8})`, `troupe-agent  built in  sha256:([0-9a-f]+)…`},
		{"hello-world's image on a cluster", `on a cluster troupe.local/troupe-env:([0-9a-f]{8})`, `on a cluster troupe.local/troupe-env:([0-9a-f]+)…`},
	} {
		live := regexp.MustCompile(f.live).FindStringSubmatch(out)
		typed := regexp.MustCompile(f.doc).FindSubmatch(doc)
		switch {
		case live == nil:
			t.Errorf("the dry run does not show %s (%s):\n%s", f.what, f.live, out)
		case typed == nil || string(typed[1]) != live[1]:
			t.Errorf("docs/run.md's dry-run example does not show %s as today's %s…: paste it where it matches %s", f.what, live[1], f.doc)
		}
	}
}
