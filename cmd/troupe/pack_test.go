package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/troupebench/troupe/runtime"
)

// tarEntry is what a copy-out may depend on in a tar header, and the
// content.
type tarEntry struct {
	Name, Linkname   string
	Typeflag         byte
	Mode             int64
	Uid, Gid         int
	Size             int64
	ModTime          time.Time
	Devmajor, Devmin int64
	Data             string
}

func tarEntries(t *testing.T, r io.Reader) []tarEntry {
	t.Helper()
	tr := tar.NewReader(r)
	var out []tarEntry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{h.Name, h.Linkname, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Size, h.ModTime.UTC(), h.Devmajor, h.Devminor, string(data)})
	}
}

// TestPackMatchesDockerArchive: troupe call pack SRC, run in an exec as a
// Kubernetes backend runs it, gives the tar Docker's GET
// /containers/{id}/archive gives of the same SRC, entry for entry.
func TestPackMatchesDockerArchive(t *testing.T) {
	rt := testDocker(t)
	box := startBox(t, rt, container.HostConfig{})
	box.sh(t, `set -e
mkdir -p /logs/artifacts/sub/empty
printf 'alpha\n' > /logs/artifacts/a.txt
chown 1000:1001 /logs/artifacts/a.txt && chmod 640 /logs/artifacts/a.txt
head -c 100000 /bin/busybox > /logs/artifacts/sub/big.bin
chmod 4755 /logs/artifacts/sub/big.bin
chmod 2770 /logs/artifacts/sub
ln -s /etc/passwd /logs/artifacts/out
ln -s ../.. /logs/artifacts/sub/up
mkfifo /logs/artifacts/pipe
mknod /logs/artifacts/null c 1 3
printf one > /logs/one.txt`)
	for _, src := range []string{"/logs/artifacts", "/logs/artifacts/", "/logs/one.txt", "/logs/artifacts/out"} {
		t.Run(strings.ReplaceAll(src, "/", "_"), func(t *testing.T) {
			var packed, errOut bytes.Buffer
			p, err := rt.Container(box.id).Exec(t.Context(), runtime.ExecSpec{Cmd: []string{runtime.BinaryPath, "call", "pack", src}, Stdout: &packed, Stderr: &errOut})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if code, err := p.Wait(t.Context()); code != 0 || err != nil {
				t.Fatalf("troupe call pack %s: exit %d, %v\n%s", src, code, err, errOut.String())
			}
			rc, _, err := rt.Client().CopyFromContainer(t.Context(), box.id, src)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			want, got := tarEntries(t, rc), tarEntries(t, &packed)
			if len(want) < 1 {
				t.Fatal("Docker's archive is empty")
			}
			for i := range max(len(want), len(got)) {
				var w, g tarEntry
				if i < len(want) {
					w = want[i]
				}
				if i < len(got) {
					g = got[i]
				}
				if w != g {
					t.Errorf("entry %d:\n pack   %+v\n docker %+v", i, clipEntry(g), clipEntry(w))
				}
			}
		})
	}
	_, stderr, code, _ := box.run(t, runtime.BinaryPath, "call", "pack", "/logs/nothing-here")
	if code != exitFailed || !strings.Contains(stderr, "/logs/nothing-here") {
		t.Errorf("pack of a missing path: exit %d %s", code, stderr)
	}
}

func clipEntry(e tarEntry) tarEntry {
	if len(e.Data) > 16 {
		e.Data = e.Data[:16] + "…"
	}
	return e
}
