package taskfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// secretTree makes host/ with a secret .env and host/task/, the task's
// folder, with a real instruction and the links given (name -> target).
func secretTree(t *testing.T, links map[string]string) (task, secretFile string) {
	t.Helper()
	host := t.TempDir()
	secretFile = filepath.Join(host, ".env")
	must(t, os.WriteFile(secretFile, []byte("OPENAI_API_KEY=sk-secret-from-the-host\n"), 0o600))
	task = filepath.Join(host, "task")
	must(t, os.MkdirAll(filepath.Join(task, "sub", "deeper"), 0o755))
	must(t, os.WriteFile(filepath.Join(task, "real.md"), []byte("the instruction\n"), 0o644))
	for name, target := range links {
		p := filepath.Join(task, filepath.FromSlash(name))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.Symlink(target, p))
	}
	return task, secretFile
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadFileThroughLinks(t *testing.T) {
	cases := []struct {
		name  string
		links map[string]string
		read  string
		// want is the content read, or leads where the refusal says
		// the path ends ("" for another error).
		want, leads string
		fail        bool
	}{
		{name: "a link inside", links: map[string]string{"instruction.md": "real.md"}, read: "instruction.md", want: "the instruction\n"},
		{name: "a chain inside", links: map[string]string{"instruction.md": "sub/a", "sub/a": "../sub/deeper/b", "sub/deeper/b": "../../real.md"}, read: "instruction.md", want: "the instruction\n"},
		{name: "through a folder link", links: map[string]string{"d": "sub", "sub/deeper/x": "../../real.md"}, read: "d/deeper/x", want: "the instruction\n"},
		// Each link is lexically inside the task: sub/up is the task's
		// folder itself, and sub/up/.. looks like sub, but is the host.
		{name: "a chain of in-folder links out", links: map[string]string{"sub/up": "..", "a": "sub/up/..", "instruction.md": "a/.env"}, read: "instruction.md", leads: "../.env", fail: true},
		{name: "up and out", links: map[string]string{"instruction.md": "../.env"}, read: "instruction.md", leads: "../.env", fail: true},
		{name: "absolute", links: map[string]string{"instruction.md": "/etc/passwd"}, read: "instruction.md", leads: "/etc/passwd", fail: true},
		{name: "a folder out", links: map[string]string{"sub/host": "../.."}, read: "sub/host/.env", leads: "../.env", fail: true},
		{name: "a loop", links: map[string]string{"a": "b", "b": "a"}, read: "a", fail: true},
		{name: "missing", read: "nothing.md", fail: true},
		{name: "a file as a folder", read: "real.md/..", fail: true},
		{name: "dotdot in the name", read: "../.env", leads: "../.env", fail: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task, _ := secretTree(t, c.links)
			d, err := Open(task)
			must(t, err)
			t.Cleanup(func() { d.Close() })
			data, err := d.ReadFile(c.read, 1<<20)
			if bytes.Contains(data, []byte("sk-secret")) || (err != nil && strings.Contains(err.Error(), "sk-secret")) {
				t.Fatalf("the secret was read: %q %v", data, err)
			}
			if !c.fail {
				if err != nil || string(data) != c.want {
					t.Fatalf("got %q, %v; want %q", data, err, c.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("read %q through links that leave", data)
			}
			le, ok := errors.AsType[*LinkError](err)
			if c.leads == "" {
				if ok {
					t.Fatalf("a link error for a path that does not leave: %v", err)
				}
				return
			}
			want := c.leads
			if !filepath.IsAbs(want) {
				want = filepath.Join(task, want)
			}
			if !ok || le.Leads != want || !errors.Is(err, ErrOutside) {
				t.Fatalf("got %v (%#v), want a *LinkError leading to %s", err, le, want)
			}
			if !strings.Contains(err.Error(), c.read) {
				t.Errorf("the error does not name the file: %v", err)
			}
		})
	}
}

func TestReadFileRefusesPipesAndBigFiles(t *testing.T) {
	dir := t.TempDir()
	must(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2048), 0o644))
	d, err := Open(dir)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	if _, err := d.ReadFile("pipe", 0); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("pipe: %v", err)
	}
	if _, err := d.ReadFile("big", 1024); err == nil || !strings.Contains(err.Error(), "limit is 1024") {
		t.Errorf("big: %v", err)
	}
	if data, err := d.ReadFile("big", 2048); err != nil || len(data) != 2048 {
		t.Errorf("at the limit: %d bytes, %v", len(data), err)
	}
}

func TestCheckLinks(t *testing.T) {
	task, _ := secretTree(t, map[string]string{
		"ok": "real.md", "dangling": "sub/none", "sub/up": "..", "a": "sub/up/..", "tests/out": "../a/.env",
	})
	d, err := Open(task)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	err = d.CheckLinks(".")
	if err == nil {
		t.Fatal("no error")
	}
	for _, name := range []string{"a links", "tests/out links"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%q not in %v", name, err)
		}
	}
	for _, name := range []string{"ok links", "dangling", "sub/up links"} {
		if strings.Contains(err.Error(), name) {
			t.Errorf("%q in %v", name, err)
		}
	}
}

// FuzzReadFile builds a task folder of links from the input (lines
// "name -> target", or "name" for a folder) beside a secret outside it,
// and reads every name: nothing outside is ever read, and a read that
// succeeds returns the one file inside.
func FuzzReadFile(f *testing.F) {
	f.Add("sub\nsub/up -> ..\na -> sub/up/..\ninstruction.md -> a/.env")
	f.Add("instruction.md -> ../.env")
	f.Add("x -> /etc/passwd\ny -> x")
	f.Add("d -> .\ne -> d/d/d/../..\ninstruction.md -> e/.env")
	f.Add("l -> real.md\nm -> l")
	f.Fuzz(func(t *testing.T, spec string) {
		if len(spec) > 2000 {
			return
		}
		host := t.TempDir()
		secret := []byte("SECRET-OUTSIDE")
		must(t, os.WriteFile(filepath.Join(host, ".env"), secret, 0o600))
		task := filepath.Join(host, "task")
		must(t, os.Mkdir(task, 0o755))
		must(t, os.WriteFile(filepath.Join(task, "real.md"), []byte("inside"), 0o644))
		var names []string
		for line := range strings.Lines(spec) {
			name, target, isLink := strings.Cut(strings.TrimSpace(line), " -> ")
			if !filepath.IsLocal(name) || strings.ContainsRune(name+target, 0) {
				continue
			}
			p := filepath.Join(task, name)
			if isLink {
				if os.MkdirAll(filepath.Dir(p), 0o755) == nil && os.Symlink(target, p) == nil {
					names = append(names, name)
				}
			} else {
				os.MkdirAll(p, 0o755)
			}
		}
		d, err := Open(task)
		must(t, err)
		defer d.Close()
		for _, name := range append(names, "real.md", "../.env") {
			data, err := d.ReadFile(name, 1<<10)
			if bytes.Contains(data, secret) {
				t.Fatalf("%s read the secret outside", name)
			}
			if err == nil && string(data) != "inside" {
				t.Fatalf("%s read %q", name, data)
			}
			d.CheckLinks(".")
		}
	})
}
