// Package runtimetest is the conformance suite every container backend
// passes: what a trial relies on of a backend and the runtime.Container
// its Create returns, checked against a real engine.
package runtimetest

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/staticbin"
)

// Config describes what the suite may use.
type Config struct {
	// Image has a POSIX shell and coreutils-like tools (busybox will do).
	Image string
	// Labels go on every container the suite creates (a job label lets the
	// caller check afterwards that nothing was left behind).
	Labels map[string]string
	// Binary, when set, is given to every container the suite creates that
	// does not name one (a backend needs it for a container with a network:
	// troupe fence runs from it).
	Binary *runtime.Binary
}

// Backend is what the suite needs of a backend: containers made, and
// found by label. runtime/docker and runtime/kubernetes implement it.
type Backend interface {
	Create(ctx context.Context, spec runtime.ContainerSpec) (runtime.Container, error)
	List(ctx context.Context, labels map[string]string) ([]runtime.Resource, error)
	Remove(ctx context.Context, r runtime.Resource) error
}

// Run runs the suite.
func Run(t *testing.T, rt Backend, cfg Config) {
	t.Run("Lifecycle", func(t *testing.T) { lifecycle(t, rt, cfg) })
	t.Run("ExecStreamsAndExitCodes", func(t *testing.T) { execs(t, rt, cfg) })
	t.Run("NoNetworkByDefault", func(t *testing.T) { noNetwork(t, rt, cfg) })
	t.Run("OnlineAndOffline", func(t *testing.T) { onlineOffline(t, rt, cfg) })
	t.Run("CopyOut", func(t *testing.T) { copyOut(t, rt, cfg) })
}

// Started creates and starts a container that idles, and removes it when the
// test ends. Other test packages use it too.
func Started(t testing.TB, rt Backend, cfg Config, spec runtime.ContainerSpec) runtime.Container {
	t.Helper()
	c := created(t, rt, cfg, spec)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// created creates a container that will idle once started, and removes it
// when the test ends.
func created(t testing.TB, rt Backend, cfg Config, spec runtime.ContainerSpec) runtime.Container {
	t.Helper()
	ctx := context.Background()
	if spec.Image == "" {
		spec.Image = cfg.Image
	}
	if spec.Entrypoint == nil {
		spec.Entrypoint = []string{"sleep", "3600"}
	}
	if spec.Binary == nil {
		spec.Binary = cfg.Binary
	}
	labels := map[string]string{runtime.LabelTrial: strings.ReplaceAll(t.Name(), "/", "-")}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	spec.Labels = labels
	c, err := rt.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Remove(context.Background()); err != nil {
			t.Errorf("remove: %v", err)
		}
	})
	return c
}

// Exec runs a command in container c to its end and returns its output
// and exit code.
func Exec(t testing.TB, c runtime.Container, spec runtime.ExecSpec) (string, int, error) {
	t.Helper()
	var out syncbuf.Buffer
	spec.Stdout, spec.Stderr = &out, &out
	p, err := c.Exec(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, err := p.Wait(ctx)
	return out.String(), code, err
}

func sh(t testing.TB, c runtime.Container, script string) string {
	t.Helper()
	out, code, err := Exec(t, c, runtime.ExecSpec{Cmd: []string{"sh", "-c", script}})
	if err != nil || code != 0 {
		t.Fatalf("sh -c %q: exit %d, %v: %s", script, code, err, out)
	}
	return out
}

func lifecycle(t *testing.T, rt Backend, cfg Config) {
	ctx := context.Background()
	// Files copied in before the start are there once it has started.
	early := created(t, rt, cfg, runtime.ContainerSpec{})
	if err := early.CopyIn(ctx, []runtime.File{{Path: "/opt/early/f", Data: []byte("before start"), Mode: 0o640, UID: 7, GID: 8}}); err != nil {
		t.Fatal(err)
	}
	if err := early.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, early, "stat -c '%u %g %a' /opt/early/f; cat /opt/early/f"); got != "7 8 640\nbefore start" {
		t.Errorf("a file copied in before the start: %q", got)
	}
	c := Started(t, rt, cfg, runtime.ContainerSpec{Labels: map[string]string{"troupe.test": "lifecycle"}})
	id := c.ID()
	found, err := rt.List(ctx, map[string]string{"troupe.test": "lifecycle"})
	if err != nil {
		t.Fatal(err)
	}
	// A backend may list resources that belong to the container under its
	// name (the kubernetes backend's network policy); the container is
	// among them, as a container.
	if !slices.ContainsFunc(found, func(r runtime.Resource) bool { return r.ID == id && r.Kind == runtime.KindContainer }) {
		t.Fatalf("List does not find the container by its label: %v", found)
	}
	for _, r := range found {
		if r.ID == id && (r.Labels[runtime.LabelOwner] == "" || r.Labels[runtime.LabelVersion] == "") {
			t.Errorf("listed as %s, troupe's labels missing: %v", r.Kind, r.Labels)
		}
	}
	err = c.CopyIn(ctx, []runtime.File{
		{Path: "/opt/agents/a-1/key", Data: []byte("secret-a"), Mode: 0o400, UID: 10001, GID: 10001},
		{Path: "/work", Mode: 0o775 | os.ModeDir, UID: 0, GID: 10000},
		{Path: "/opt/run.sh", Data: []byte("#!/bin/sh\necho ran $1\n"), Mode: 0o755},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := sh(t, c, "stat -c '%u %g %a' /opt/agents/a-1/key /work; cat /opt/agents/a-1/key; echo; /opt/run.sh ok")
	want := "10001 10001 400\n0 10000 775\nsecret-a\nran ok\n"
	if got != want {
		t.Errorf("copied files:\n got %q\nwant %q", got, want)
	}
	// Another user cannot read a 0400 file of someone else's.
	if out, code, _ := Exec(t, c, runtime.ExecSpec{Cmd: []string{"cat", "/opt/agents/a-1/key"}, User: "10002"}); code == 0 {
		t.Errorf("uid 10002 read uid 10001's key: %q", out)
	}
	if err := c.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx); err != nil {
		t.Errorf("removing a removed container must succeed: %v", err)
	}
	// The reaper's way, by the listed resource, tolerates it too.
	if err := rt.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: id}); err != nil {
		t.Errorf("removing a removed container by its resource must succeed: %v", err)
	}
	found, _ = rt.List(ctx, map[string]string{"troupe.test": "lifecycle"})
	if slices.ContainsFunc(found, func(r runtime.Resource) bool { return r.ID == id }) {
		t.Error("the removed container is still listed")
	}
}

func execs(t *testing.T, rt Backend, cfg Config) {
	c := Started(t, rt, cfg, runtime.ContainerSpec{})
	if _, code, err := Exec(t, c, runtime.ExecSpec{Cmd: []string{"sh", "-c", "exit 3"}}); code != 3 || err != nil {
		t.Errorf("exit 3: got %d, %v", code, err)
	}
	_, code, err := Exec(t, c, runtime.ExecSpec{Cmd: []string{"no-such-command"}})
	ee, ok := errors.AsType[*runtime.ExecError](err)
	if !errors.Is(err, runtime.ErrNotFound) || !ok || ee.Code != code || (code != 126 && code != 127) {
		t.Errorf("missing command: %d, %v", code, err)
	}
	sh(t, c, "printf 'plain text' > /tmp/not-a-program; chmod 644 /tmp/not-a-program")
	if _, _, err := Exec(t, c, runtime.ExecSpec{Cmd: []string{"/tmp/not-a-program"}}); !errors.Is(err, runtime.ErrNotExecutable) {
		t.Errorf("non-executable file: %v", err)
	}
	// Output arrives while the process runs, not when it ends.
	first := make(chan struct{})
	var once sync.Once
	var out syncbuf.Buffer
	p, err := c.Exec(context.Background(), runtime.ExecSpec{
		Cmd:    []string{"sh", "-c", "echo first; sleep 3; echo second >&2"},
		Stdout: writerFunc(func(b []byte) (int, error) { once.Do(func() { close(first) }); return out.Write(b) }),
		Stderr: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	select {
	case <-first:
		select {
		case <-p.Done():
			t.Error("the process ended before its first output was seen")
		default:
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the first line did not arrive while the process ran")
	}
	if code, err := p.Wait(context.Background()); code != 0 || err != nil || out.String() != "first\nsecond\n" {
		t.Errorf("streamed exec: %d %v %q", code, err, out.String())
	}
	// Standard input, closed to send end-of-file.
	var echoed syncbuf.Buffer
	p, err = c.Exec(context.Background(), runtime.ExecSpec{Cmd: []string{"cat"}, Stdin: true, Stdout: &echoed})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	io.WriteString(p.Stdin(), "through stdin")
	p.Stdin().Close()
	if code, err := p.Wait(context.Background()); code != 0 || err != nil || echoed.String() != "through stdin" {
		t.Errorf("stdin: %d %v %q", code, err, echoed.String())
	}
	// An environment, a user, a folder and standard input together.
	var all syncbuf.Buffer
	p, err = c.Exec(context.Background(), runtime.ExecSpec{Cmd: []string{"sh", "-c", `echo "$A $B $(id -u) $(pwd)"; cat`},
		Env: []string{"A=a value", "B=x=y"}, User: "1234", WorkDir: "/tmp", Stdin: true, Stdout: &all})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	io.WriteString(p.Stdin(), "and input")
	p.Stdin().Close()
	if code, err := p.Wait(context.Background()); code != 0 || err != nil || all.String() != "a value x=y 1234 /tmp\nand input" {
		t.Errorf("env, user, folder and stdin: %d %v %q", code, err, all.String())
	}
}

// noNetwork: a container made without network has no interface up but
// loopback and no route out, and root in it cannot bring one up (no
// NET_ADMIN): whether the backend gives it no interface (Docker) or takes
// its interfaces down where it cannot undo it (Kubernetes).
func noNetwork(t *testing.T, rt Backend, cfg Config) {
	c := Started(t, rt, cfg, runtime.ContainerSpec{})
	if up, route := network(t, c); up != "lo" || route {
		t.Errorf("a container without network has interfaces up %q, default route %v", up, route)
	}
	// Not wget -T: Debian's static busybox crashes on it, which would pass
	// for a refusal.
	out, code, _ := Exec(t, c, runtime.ExecSpec{Cmd: []string{"timeout", "3", "wget", "-qO-", "http://1.1.1.1/"}})
	if code == 0 || !strings.Contains(out, "Network is unreachable") {
		t.Errorf("wget to the outside succeeded, or failed for another reason: exit %d %q", code, out)
	}
	sh(t, c, "for i in /sys/class/net/*; do ip link set ${i##*/} up 2>&1; done; true")
	if up, route := network(t, c); up != "lo" || route {
		t.Errorf("root in the container brought its network up: interfaces up %q, default route %v", up, route)
	}
}

// network is what a container can reach: the interfaces that are up, and
// whether it has a default route.
func network(t testing.TB, c runtime.Container) (up string, defaultRoute bool) {
	t.Helper()
	out := sh(t, c, `for i in /sys/class/net/*; do echo "${i##*/} $(cat $i/flags)"; done; echo routes; cat /proc/net/route`)
	ifaces, routes, _ := strings.Cut(out, "routes\n")
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(ifaces), "\n") {
		name, flags, _ := strings.Cut(line, " ")
		if v, err := strconv.ParseUint(strings.TrimPrefix(flags, "0x"), 16, 32); err == nil && v&1 != 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, line := range strings.Split(routes, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "00000000" {
			defaultRoute = true
		}
	}
	return strings.Join(names, " "), defaultRoute
}

// onlineOffline: a bridge container taken offline before it starts has
// loopback only; put online it has an interface and a default route, and
// offline again neither.
func onlineOffline(t *testing.T, rt Backend, cfg Config) {
	ctx := context.Background()
	c := created(t, rt, cfg, runtime.ContainerSpec{Network: runtime.NetworkBridge})
	if err := c.SetOnline(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if up, route := network(t, c); up != "lo" || route {
		t.Errorf("offline before start: interfaces up %q, default route %v; want lo and none", up, route)
	}
	for range 2 { // twice: it is idempotent
		if err := c.SetOnline(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	if up, route := network(t, c); up == "lo" || !route {
		t.Errorf("online: interfaces up %q, default route %v; want another and one", up, route)
	}
	if err := c.SetOnline(ctx, false); err != nil {
		t.Fatal(err)
	}
	if up, route := network(t, c); up != "lo" || route {
		t.Errorf("offline again: interfaces up %q, default route %v; want lo and none", up, route)
	}
	none := Started(t, rt, cfg, runtime.ContainerSpec{})
	if err := none.SetOnline(ctx, true); err == nil || !strings.Contains(err.Error(), "without a network of its own") {
		t.Errorf("a container made without a network put online: %v", err)
	}
}

func copyOut(t *testing.T, rt Backend, cfg Config) {
	c := Started(t, rt, cfg, runtime.ContainerSpec{})
	sh(t, c, "mkdir -p /logs/artifacts/sub && echo one > /logs/artifacts/a.txt && echo two > /logs/artifacts/sub/b.txt && ln -s /etc/passwd /logs/artifacts/link && ln -s ../../.. /logs/artifacts/sub/up")
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	os.MkdirAll(filepath.Join(dir, "artifacts"), 0o755)
	os.WriteFile(filepath.Join(dir, "artifacts", "a.txt"), []byte("the caller's\n"), 0o644)
	skipped, err := c.CopyOut(context.Background(), "/logs/artifacts", root, "artifacts", 0)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"artifacts/a.txt": "the caller's\n", "artifacts/sub/b.txt": "two\n"} {
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q %v", file, got, err)
		}
	}
	if len(skipped) != 3 || !slices.ContainsFunc(skipped, func(s string) bool { return strings.Contains(s, "a.txt (a file of that name is already there") }) {
		t.Errorf("links and a file already there must be skipped and listed, got %v", skipped)
	}
	if _, err := os.Lstat(filepath.Join(dir, "artifacts", "link")); err == nil {
		t.Error("a symlink was copied out")
	}
	// A byte limit: what fits is copied, the rest skipped and listed.
	sh(t, c, "mkdir -p /big && head -c 3000 /dev/zero > /big/a && head -c 3000 /dev/zero > /big/b")
	skipped, err = c.CopyOut(context.Background(), "/big", root, "big", 4000)
	if err != nil {
		t.Fatal(err)
	}
	copied, _ := filepath.Glob(filepath.Join(dir, "big", "*"))
	if len(copied) != 1 || len(skipped) != 1 || !strings.Contains(skipped[0], "over the copy-out limit") {
		t.Errorf("with a 4000-byte limit, two 3000-byte files: copied %v, skipped %v", copied, skipped)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Binary builds troupe's static binary from the module in moduleDir and
// reads it, for tests that start containers with it; the built file is
// removed, only its bytes are kept.
func Binary(ctx context.Context, moduleDir string) (*runtime.Binary, error) {
	dir, err := os.MkdirTemp("", "troupe-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "troupe")
	if err := staticbin.Build(ctx, moduleDir, path); err != nil {
		return nil, err
	}
	return staticbin.Load(path)
}
