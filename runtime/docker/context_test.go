package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/task/taskfs"
)

// contextWithLinks makes host/.env (a secret) and host/env/, a build
// context with a Dockerfile and the links given.
func contextWithLinks(t *testing.T, links map[string]string) string {
	t.Helper()
	host := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(host, ".env"), []byte("FROM sk-secret-of-the-host\n"), 0o600))
	dir := filepath.Join(host, "env")
	must(os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "inside.txt"), []byte("inside\n"), 0o644))
	for name, target := range links {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.Remove(p)
		must(os.Symlink(target, p))
	}
	return dir
}

// TestBuildContextRefusesLinksOut: a build context whose links, each
// inside it, lead out of it is refused, naming the link, and nothing of
// the host's is read for the Dockerfile or the context.
func TestBuildContextRefusesLinksOut(t *testing.T) {
	cases := []struct {
		name  string
		links map[string]string
		// dockerfile is whether the Dockerfile itself is the link.
		dockerfile bool
		named      string
	}{
		{name: "a file out through a chain", links: map[string]string{"sub/up": "..", "sub/host": "up/..", "leak": "sub/host/.env"}, named: "leak"},
		{name: "a folder out", links: map[string]string{"host": "../"}, named: "host"},
		{name: "absolute", links: map[string]string{"passwd": "/etc/passwd"}, named: "passwd"},
		{name: "the Dockerfile", links: map[string]string{"sub/up": "..", "Dockerfile": "sub/up/../.env"}, dockerfile: true, named: "Dockerfile"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := contextWithLinks(t, c.links)
			if !c.dockerfile {
				os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM busybox:latest\nCOPY . /ctx\n"), 0o644)
			}
			var buf bytes.Buffer
			err := tarDir(&buf, dir)
			if err == nil || !errors.Is(err, taskfs.ErrOutside) || !strings.Contains(err.Error(), filepath.Join(dir, c.named)) {
				t.Errorf("tarDir: %v, want a refusal naming %s", err, c.named)
			}
			if bytes.Contains(buf.Bytes(), []byte("sk-secret")) {
				t.Error("the context holds the host's secret")
			}
			if c.dockerfile {
				data, err := readDockerfile(dir, "Dockerfile")
				if err == nil || bytes.Contains(data, []byte("sk-secret")) || !errors.Is(err, taskfs.ErrOutside) {
					t.Errorf("readDockerfile: %q, %v", data, err)
				}
			}
		})
	}
}

// TestBuildContextKeepsLinksInside: links that stay inside are written as
// links, files as themselves.
func TestBuildContextKeepsLinksInside(t *testing.T) {
	dir := contextWithLinks(t, map[string]string{"sub/up": "..", "alias": "sub/up/inside.txt"})
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM busybox:latest\n"), 0o644)
	var buf bytes.Buffer
	if err := tarDir(&buf, dir); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got[h.Name] = h.Linkname + string(body)
	}
	want := map[string]string{"Dockerfile": "FROM busybox:latest\n", "alias": "sub/up/inside.txt", "inside.txt": "inside\n", "sub": "", "sub/up": ".."}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (all: %q)", k, got[k], v, got)
		}
	}
	if data, err := readDockerfile(dir, "Dockerfile"); err != nil || string(data) != want["Dockerfile"] {
		t.Errorf("readDockerfile: %q, %v", data, err)
	}
}
