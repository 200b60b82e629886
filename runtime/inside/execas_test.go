//go:build linux

package inside

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

const (
	testGroup  = "testdata/etc/group"
	testPasswd = "testdata/etc/passwd"
)

// TestExecAsGroups: a user's supplementary groups are the groups that list its
// name, once each; a uid without a name has none.
func TestExecAsGroups(t *testing.T) {
	for _, c := range []struct {
		file, name string
		want       []int
	}{
		{testGroup, "agent", []int{10, 50}},
		{testGroup, "root", []int{10}},
		{testGroup, "nohome", []int{}},
		{testGroup, "", []int{}},
		{testGroup, "agentx", []int{80}},
		{"testdata/etc/no-such-file", "agent", []int{}},
	} {
		got, err := memberOf(c.file, c.name)
		if err != nil || !slices.Equal(got, c.want) || got == nil {
			t.Errorf("memberOf(%s, %q) = %#v, %v; want %v", c.file, c.name, got, err, c.want)
		}
	}
	if _, err := memberOf(t.TempDir(), "agent"); err == nil {
		t.Error("a folder read as the group file gave no error")
	}
	// As docker exec: the default user and a user given with its group
	// have no supplementary groups; a uid has its name's.
	for _, c := range []struct {
		spec, name string
		want       []int
	}{
		{"", "root", []int{}},
		{"root", "root", []int{10}},
		{"agent", "agent", []int{10, 50}},
		{"1000", "agent", []int{10, 50}},
		{"agent:agent", "agent", []int{}},
		{"1000:50", "agent", []int{}},
		{"4242", "", []int{}},
	} {
		got, err := supplementaryGroups(testGroup, c.spec, c.name)
		if err != nil || !slices.Equal(got, c.want) || got == nil {
			t.Errorf("supplementaryGroups(%q, %q) = %#v, %v; want %v", c.spec, c.name, got, err, c.want)
		}
	}
}

func TestExecAsHome(t *testing.T) {
	for _, c := range []struct {
		file string
		u    User
		want string
	}{
		{testPasswd, User{Name: "agent", UID: 1000}, "/home/agent"},
		{testPasswd, User{Name: "twin", UID: 1000}, "/home/twin"},
		{testPasswd, User{UID: 1000, GID: 5}, "/home/agent"}, // the first entry of the uid
		{testPasswd, User{Name: "root"}, "/root"},
		{testPasswd, User{UID: 4242}, "/"},
		{testPasswd, User{Name: "nohome", UID: 1001}, "/"},
		{"testdata/etc/no-such-file", User{Name: "root"}, "/"},
	} {
		if got := homeOf(c.file, c.u); got != c.want {
			t.Errorf("homeOf(%s, %+v) = %q; want %q", c.file, c.u, got, c.want)
		}
	}
}

func TestExecAsEnv(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/root", "A=1", "B=2", "A=dup"}
	for _, c := range []struct {
		name      string
		overrides []string
		home      string
		want      []string
	}{
		{"home from passwd", nil, "/home/agent", []string{"PATH=/bin", "A=1", "B=2", "A=dup", "HOME=/home/agent"}},
		{"override and add", []string{"A=x", "C=3"}, "/", []string{"PATH=/bin", "B=2", "A=x", "C=3", "HOME=/"}},
		{"HOME given wins", []string{"HOME=/given"}, "/home/agent", []string{"PATH=/bin", "A=1", "B=2", "A=dup", "HOME=/given"}},
		{"last of a key wins", []string{"B=first", "B=last", "PATH=/usr/bin:/bin"}, "/", []string{"A=1", "A=dup", "B=last", "PATH=/usr/bin:/bin", "HOME=/"}},
		{"empty value", []string{"A="}, "/", []string{"PATH=/bin", "B=2", "A=", "HOME=/"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := execEnv(base, c.overrides, c.home)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("execEnv = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	for _, bad := range []string{"NOEQUALS", "=v", ""} {
		if _, err := execEnv(base, []string{bad}, "/"); err == nil || !strings.Contains(err.Error(), "not K=V") {
			t.Errorf("--env %q: %v", bad, err)
		}
	}
	if base[1] != "HOME=/root" || len(base) != 5 {
		t.Errorf("execEnv changed its base: %q", base)
	}
}

func TestExecAsPath(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"A=1", "PATH=/x:/y"}, "/x:/y"},
		{[]string{"PATH=/old", "PATH=/new"}, "/new"},
		{[]string{"PATHX=/no"}, defaultPath},
		{nil, defaultPath},
	} {
		if got := envPath(c.env); got != c.want {
			t.Errorf("envPath(%q) = %q; want %q", c.env, got, c.want)
		}
	}
}

// TestExecAsLookCmd: a name is found in PATH as a shell finds it, and the error
// says "not found" (127) only when there is no such file.
func TestExecAsLookCmd(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("not root: access(2) checks as this user")
	}
	plain, runs, folder := t.TempDir(), t.TempDir(), t.TempDir()
	mk := func(dir, name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk(plain, "tool", 0o644)
	tool := mk(runs, "tool", 0o755)
	mk(plain, "only-plain", 0o644)
	os.Mkdir(filepath.Join(folder, "dir"), 0o755)
	path := strings.Join([]string{filepath.Join(plain, "missing"), plain, folder, runs}, ":")
	for _, c := range []struct {
		name     string
		want     string
		code     int
		message  string
		pathList string
	}{
		{name: "tool", want: tool, pathList: path},
		{name: "only-plain", code: ExitNotExecutable, message: "only-plain: permission denied", pathList: path},
		{name: "missing", code: ExitNotFound, message: "missing: not found", pathList: path},
		{name: "dir", code: ExitNotExecutable, message: "dir: is a folder", pathList: path},
		{name: tool, want: tool, pathList: ""},
		{name: filepath.Join(plain, "tool"), code: ExitNotExecutable, message: "permission denied", pathList: path},
		{name: filepath.Join(plain, "nope"), code: ExitNotFound, message: "not found", pathList: path},
		{name: filepath.Join(plain, "tool", "under-a-file"), code: ExitNotFound, message: "not found", pathList: path},
		{name: "tool", code: ExitNotFound, message: "tool: not found", pathList: ""},
	} {
		got, err := lookCmd(c.name, c.pathList)
		if c.code == 0 {
			if err != nil || got != c.want {
				t.Errorf("lookCmd(%q) = %q, %v; want %q", c.name, got, err, c.want)
			}
			continue
		}
		ee, ok := errors.AsType[*ExecAsError](err)
		if !ok || ee.Code != c.code || !strings.Contains(err.Error(), c.message) {
			t.Errorf("lookCmd(%q) = %q, %v; want exit %d and %q", c.name, got, err, c.code, c.message)
		}
		// The backend reads "not found" and "no such file" as a missing
		// command: only 127 may say so.
		if c.code == ExitNotExecutable && (strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "no such file")) {
			t.Errorf("lookCmd(%q): a 126 reads as not found: %v", c.name, err)
		}
	}
}

// TestExecAsFailsBeforeItStarts: the failures that come before anything
// changes in the process, run here (the others are checked in a container
// by cmd/troupe's TestExecAs).
func TestExecAsFailsBeforeItStarts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		name string
		x    ExecAs
		want string
	}{
		{"no command", ExecAs{}, "no command"},
		{"empty command", ExecAs{Cmd: []string{""}}, "no command"},
		{"unknown user", ExecAs{User: "no-such-user-troupe", Cmd: []string{"/nonexistent/troupe-test"}}, `user "no-such-user-troupe" does not exist`},
		{"unknown group", ExecAs{User: "0:no-such-group-troupe", Cmd: []string{"/nonexistent/troupe-test"}}, "does not exist"},
		{"bad env", ExecAs{Env: []string{"NOEQUALS"}, Cmd: []string{"/nonexistent/troupe-test"}}, `--env "NOEQUALS" is not K=V`},
		{"missing workdir", ExecAs{WorkDir: "/nonexistent/troupe-test", Cmd: []string{"/nonexistent/troupe-test"}}, "working folder /nonexistent/troupe-test: does not exist"},
		{"workdir is a file", ExecAs{WorkDir: file, Cmd: []string{"/nonexistent/troupe-test"}}, "is not a folder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.x.Exec()
			ee, ok := errors.AsType[*ExecAsError](err)
			if !ok || ee.Code != ExitNotExecutable || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Exec() = %v; want exit 126 and %q", err, c.want)
			}
		})
	}
}

func TestExecAsExecError(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
		msg  string
	}{
		{&os.PathError{Op: "exec", Path: "/x", Err: syscall.ENOENT}, ExitNotFound, "x: not found"},
		{syscall.EACCES, ExitNotExecutable, "x: permission denied"},
		{syscall.ENOEXEC, ExitNotExecutable, "x: exec format error"},
	} {
		err := execError("x", c.err)
		ee, ok := errors.AsType[*ExecAsError](err)
		if !ok || ee.Code != c.code || !strings.HasPrefix(err.Error(), c.msg) {
			t.Errorf("execError(%v) = %v; want %d %q", c.err, err, c.code, c.msg)
		}
	}
}

// FuzzExecAsEtcFiles: any /etc/group and /etc/passwd give gids once each,
// none negative, and a home folder; they never panic.
func FuzzExecAsEtcFiles(f *testing.F) {
	group, _ := os.ReadFile(testGroup)
	passwd, _ := os.ReadFile(testPasswd)
	f.Add(group, passwd, "agent", 1000)
	f.Add([]byte("a:x:1:b,a\r\na:x:1:a\n"), []byte("a:x:1:1::/h:/bin/sh\r\n"), "a", 1)
	f.Add([]byte(""), []byte(""), "", 0)
	f.Fuzz(func(t *testing.T, group, passwd []byte, name string, uid int) {
		gids := groupsListing(group, name)
		seen := map[int]bool{}
		for _, g := range gids {
			if g < 0 || seen[g] {
				t.Fatalf("gids %v", gids)
			}
			seen[g] = true
		}
		if home := homeIn(passwd, User{Name: name, UID: uid}); home == "" || strings.ContainsAny(home, ":\n") {
			t.Fatalf("home %q", home)
		}
	})
}
