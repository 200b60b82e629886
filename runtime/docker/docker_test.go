package docker

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/runtime/runtimetest"
	"github.com/troupebench/troupe/runtime/tunnel"
)

// These tests run against the real Docker Engine. Every resource they make
// carries troupe.job=<runID>; TestMain fails the run if any is left behind,
// images built included.

const testImage = "busybox:latest"

var (
	runID      string
	testBinary *runtime.Binary
)

func TestMain(m *testing.M) {
	if os.Getenv(reaperChildEnv) != "" {
		reaperChild()
		return
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	b := make([]byte, 4)
	rand.Read(b)
	runID = "test-" + hex.EncodeToString(b)
	d := New(runID, nil)
	if err := d.Open(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "these tests need a Docker engine: %v\n", err)
		return 1
	}
	d.BinaryVolumePrefix = testVolumePrefix()
	defer d.Close(ctx)
	if !d.exists(ctx, testImage) {
		fmt.Fprintf(os.Stderr, "%s is missing: run bash .ci/seed-images (it builds it offline from Debian's busybox-static)\n", testImage)
		return 1
	}
	var err error
	if testBinary, err = runtimetest.Binary(ctx, "../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if _, err := d.RemoveBinaryVolumes(ctx, false); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: remove the binary volumes: %v\n", err)
		code = 1
	}
	if leaks := leftovers(ctx, d); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left %d resources behind: %v\n", len(leaks), leaks)
		code = 1
	}
	return code
}

// leftovers lists (and removes) what this run left: containers, networks,
// and images built with this run's version label.
func leftovers(ctx context.Context, d *Docker) []string {
	var out []string
	rs, err := d.List(ctx, map[string]string{runtime.LabelJob: runID})
	if err != nil {
		return []string{err.Error()}
	}
	for _, r := range rs {
		out = append(out, r.String())
		d.Remove(ctx, r)
	}
	imgs, err := d.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", runtime.LabelVersion+"="+runID))})
	if err != nil {
		return append(out, err.Error())
	}
	for _, img := range imgs {
		out = append(out, "image "+strings.Join(img.RepoTags, ","))
		d.RemoveImage(ctx, img.ID)
	}
	ctrs, _ := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", runtime.LabelVersion+"="+runID))})
	for _, c := range ctrs {
		out = append(out, "container "+c.ID[:12]+" (build step)")
	}
	return out
}

func newDocker(t testing.TB) *Docker {
	t.Helper()
	d := New(runID, nil)
	if err := d.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.BinaryVolumePrefix = testVolumePrefix()
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

// testVolumePrefix names this run's binary volumes, so that it can remove
// them without touching another run's.
func testVolumePrefix() string { return DefaultBinaryVolumePrefix + runID + "-" }

var cfg = func() runtimetest.Config {
	return runtimetest.Config{Image: testImage, Labels: map[string]string{runtime.LabelJob: runID}, Binary: testBinary}
}

func TestConformance(t *testing.T) {
	runtimetest.Run(t, newDocker(t), cfg())
}

// trialContainer starts a container the way a trial does: no network, the
// troupe binary copied in, troupe init as PID 1.
func trialContainer(t testing.TB, d *Docker) string {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{runtime.LabelJob: runID, runtime.LabelTrial: "t-" + strings.ReplaceAll(t.Name(), "/", "-")}
	c, err := d.Create(ctx, runtime.ContainerSpec{Image: testImage, Entrypoint: []string{runtime.BinaryPath, "init"}, Labels: labels, Pids: 512})
	if err != nil {
		t.Fatal(err)
	}
	id := c.ID()
	t.Cleanup(func() {
		if err := d.Remove(context.Background(), runtime.Resource{Kind: runtime.KindContainer, ID: id}); err != nil {
			t.Errorf("remove: %v", err)
		}
	})
	if err := d.Container(id).CopyIn(ctx, []runtime.File{{Path: runtime.BinaryPath, Data: testBinary.Data, Mode: 0o755}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Container(id).Start(ctx); err != nil {
		t.Fatal(err)
	}
	return id
}

func shell(t testing.TB, d *Docker, id, script string) (string, int) {
	t.Helper()
	out, code, err := runtimetest.Exec(t, d.Container(id), runtime.ExecSpec{Cmd: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return out, code
}

// hostTargets serves an HTTP page and a websocket echo on the host, as the
// relay and the gateway would be.
func hostTargets(t testing.TB) tunnel.Dialer {
	t.Helper()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello through the tunnel")
	}))
	t.Cleanup(web.Close)
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		c.Write(r.Context(), typ, append([]byte("echo: "), msg...))
	}))
	t.Cleanup(ws.Close)
	addrs := map[string]string{"llm": web.Listener.Addr().String(), "relay": ws.Listener.Addr().String()}
	return func(ctx context.Context, name string) (net.Conn, error) {
		addr, ok := addrs[name]
		if !ok {
			return nil, fmt.Errorf("no target %q", name)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

var trialListens = []tunnel.Listen{{Addr: "127.0.0.1:3600", Name: "relay"}, {Addr: "127.0.0.1:3601", Name: "llm"}}

func openTunnel(t testing.TB, d *Docker, id string, dial tunnel.Dialer) *tunnel.Tunnel {
	t.Helper()
	tun := tunnel.New(d.Container(id), runtime.BinaryPath, trialListens, dial, tunnel.Options{})
	if err := tun.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tun.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tun.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return tun
}

// wsHandshake is a websocket client written with printf for nc: the
// upgrade request, then one masked text frame "hello".
func wsHandshake() string {
	mask := []byte{1, 2, 3, 4}
	frame := []byte{0x81, 0x80 | 5}
	frame = append(frame, mask...)
	for i, c := range []byte("hello") {
		frame = append(frame, c^mask[i%4])
	}
	var esc strings.Builder
	for _, c := range frame {
		fmt.Fprintf(&esc, `\%03o`, c)
	}
	return `(printf 'GET / HTTP/1.1\r\nHost: 127.0.0.1:3600\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n'; sleep 1; printf '` + esc.String() + `'; sleep 1) | nc 127.0.0.1 3600`
}

func TestTunnel(t *testing.T) {
	d := newDocker(t)
	id := trialContainer(t, d)
	tun := openTunnel(t, d, id, hostTargets(t))

	out, code := shell(t, d, id, "wget -qO- http://127.0.0.1:3601/")
	if code != 0 || out != "hello through the tunnel" {
		t.Errorf("HTTP through the tunnel: exit %d, %q", code, out)
	}
	out, _ = shell(t, d, id, wsHandshake())
	if !strings.Contains(out, "101 Switching Protocols") || !strings.Contains(out, "echo: hello") {
		t.Errorf("websocket through the tunnel: %q", out)
	}
	// Not wget -T: Debian's static busybox crashes on it, which would pass
	// for a refusal.
	out, code = shell(t, d, id, "timeout 3 wget -qO- http://1.1.1.1/ 2>&1")
	if code == 0 || !strings.Contains(out, "Network is unreachable") {
		t.Errorf("the container reached the outside, or failed for another reason: exit %d %q", code, out)
	}
	// Several connections at once share the one stream.
	out, code = shell(t, d, id, "for i in 1 2 3 4 5 6 7 8; do wget -qO- http://127.0.0.1:3601/ & done; wait")
	if code != 0 || strings.Count(out, "hello through the tunnel") != 8 {
		t.Errorf("parallel requests: %q", out)
	}
	if err := tun.Close(t.Context()); err != nil {
		t.Errorf("close tunnel: %v", err)
	}
	if out, code := shell(t, d, id, "timeout 3 wget -qO- http://127.0.0.1:3601/ 2>&1"); code == 0 || !strings.Contains(out, "Connection refused") {
		t.Errorf("after Close the tunnel answered, or failed for another reason: exit %d %q", code, out)
	}
}

// TestSweep sweeps as a trial does, through the tunnel: every process but
// PID 1 and the tunnel (the sweeping process) ends.
func TestSweep(t *testing.T) {
	d := newDocker(t)
	id := trialContainer(t, d)
	tun := openTunnel(t, d, id, hostTargets(t))
	// Agents' processes, one of which ignores TERM, and a zombie-to-be.
	shell(t, d, id, `sleep 300 >/dev/null 2>&1 &
sleep 300 >/dev/null 2>&1 &
sh -c 'trap "" TERM; while :; do sleep 1; done' >/dev/null 2>&1 &
sh -c 'sleep 0.1 & exit 0'
exit 0`)
	out, err := tun.Call(t.Context(), "sweep", "1s", nil)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	var rep inside.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("sweep report %q: %v", out, err)
	}
	killed := slices.ContainsFunc(rep.Signalled, func(p inside.Proc) bool { return p.Kill && strings.Contains(p.Cmd, "trap") })
	if len(rep.Signalled) < 3 || !killed || len(rep.Survivors) != 0 {
		t.Errorf("sweep report %+v", rep)
	}
	ps, _ := shell(t, d, id, "ps -o pid,stat,args")
	for line := range strings.Lines(ps) {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] == "PID" || strings.Contains(line, "ps -o") || strings.Contains(line, "sh -c ps") {
			continue
		}
		if f[0] != "1" && !strings.Contains(line, "troupe tunnel") {
			t.Errorf("process left after the sweep: %s", line)
		}
		if strings.HasPrefix(f[1], "Z") {
			t.Errorf("zombie left: %s", line)
		}
	}
	// The tunnel was spared.
	if out, code := shell(t, d, id, "wget -qO- http://127.0.0.1:3601/"); code != 0 || out != "hello through the tunnel" {
		t.Errorf("the sweep ended the tunnel: %q", out)
	}
	// troupe sweep in an exec of its own (the way when the tunnel is gone)
	// spares only PID 1 and itself.
	execOut, code, err := runtimetest.Exec(t, d.Container(id), runtime.ExecSpec{Cmd: []string{runtime.BinaryPath, "sweep", "--grace", "1s"}})
	if err != nil || code != 0 || json.Unmarshal([]byte(execOut), &rep) != nil {
		t.Fatalf("troupe sweep: %d %v %s", code, err, execOut)
	}
	if !slices.ContainsFunc(rep.Signalled, func(p inside.Proc) bool { return strings.Contains(p.Cmd, "troupe tunnel") }) || len(rep.Survivors) != 0 {
		t.Errorf("troupe sweep in an exec: %+v", rep)
	}
	select {
	case <-tun.Done():
	case <-time.After(10 * time.Second):
		t.Error("the tunnel still runs after troupe sweep")
	}
}

// TestSweepEndsForkChains: chains that ignore TERM and keep replacing
// themselves with a successor are all gone after the sweep, and none is
// reported as surviving KILL. A chain's process started between the
// sweep's listing and its KILL gets the KILL too; the sweep must wait for
// it as for the ones it listed.
func TestSweepEndsForkChains(t *testing.T) {
	d := newDocker(t)
	id := trialContainer(t, d)
	shell(t, d, id, `printf '%s\n' 'trap "" TERM HUP INT' 'sh /chain.sh &' > /chain.sh`)
	// Eight chains at once, then one alone: a lone chain is the one a
	// listing can miss whole (each process it read had forked its successor
	// and exited by the time its entry was read).
	for round := range 25 {
		chains := 8
		if round >= 5 {
			chains = 1
		}
		shell(t, d, id, fmt.Sprintf(`for i in $(seq %d); do sh /chain.sh >/dev/null 2>&1; done; exit 0`, chains))
		time.Sleep(100 * time.Millisecond)
		out, code, err := runtimetest.Exec(t, d.Container(id), runtime.ExecSpec{Cmd: []string{runtime.BinaryPath, "sweep", "--grace", "200ms"}})
		var rep inside.Report
		if err != nil || code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("round %d: troupe sweep: %d %v %s", round, code, err, out)
		}
		// A lone chain may be listed between a fork and its exec, under
		// another name; eight at once are not.
		if chains > 1 && !slices.ContainsFunc(rep.Signalled, func(p inside.Proc) bool { return strings.Contains(p.Cmd, "chain.sh") }) {
			t.Errorf("round %d: no chain was signalled: %+v", round, rep)
		}
		if len(rep.Survivors) != 0 {
			t.Errorf("round %d: survivors reported: %+v", round, rep.Survivors)
		}
		if ps, _ := shell(t, d, id, "ps -o pid,stat,args | grep chain.sh | grep -v grep; exit 0"); ps != "" {
			t.Errorf("round %d: chains left after the sweep:\n%s", round, ps)
		}
	}
}

// TestScopedSweepSparesTheEnvironment: a sweep told the agents' uids, or
// the processes there were before them, ends the agents' fork chains (TERM
// ignored, each replacing itself) and leaves the environment's own
// process, started before the agents by root, running.
func TestScopedSweepSparesTheEnvironment(t *testing.T) {
	d := newDocker(t)
	id := trialContainer(t, d)
	shell(t, d, id, `printf '%s\n' 'trap "" TERM HUP INT' 'sh /chain.sh &' > /chain.sh
sh -c 'trap "" TERM; exec sleep 100000' >/dev/null 2>&1 &
exit 0`)
	env := func() string {
		out, _ := shell(t, d, id, "pgrep -f 'sleep 100000'; exit 0")
		return strings.TrimSpace(out)
	}
	daemon := env()
	if daemon == "" {
		t.Fatal("the environment's process did not start")
	}
	base, code, err := runtimetest.Exec(t, d.Container(id), runtime.ExecSpec{Cmd: []string{runtime.BinaryPath, "call", "baseline"}})
	if err != nil || code != 0 {
		t.Fatalf("troupe call baseline: %d %v %s", code, err, base)
	}
	for round, c := range []struct {
		name, user, spec string
	}{
		{"by uid", "10001:10000", `{"grace": 200000000, "uids": [10001, 10002]}`},
		{"by uid, one chain", "10002:10000", `{"grace": 200000000, "uids": [10001, 10002]}`},
		{"by baseline", "0:0", `{"grace": 200000000, "baseline": ` + strings.TrimSpace(base) + `}`},
	} {
		chains := 4
		if round == 1 {
			chains = 1
		}
		out, code, err := runtimetest.Exec(t, d.Container(id), runtime.ExecSpec{User: c.user, Cmd: []string{"sh", "-c", fmt.Sprintf(`for i in $(seq %d); do sh /chain.sh >/dev/null 2>&1; done; exit 0`, chains)}})
		if err != nil || code != 0 {
			t.Fatalf("%s: start the chains: %d %v %s", c.name, code, err, out)
		}
		time.Sleep(100 * time.Millisecond)
		out, code, err = runtimetest.Exec(t, d.Container(id), runtime.ExecSpec{Cmd: []string{runtime.BinaryPath, "call", "sweep", c.spec}})
		var rep inside.Report
		if err != nil || code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("%s: troupe call sweep: %d %v %s", c.name, code, err, out)
		}
		if len(rep.Survivors) != 0 || rep.Spared == 0 {
			t.Errorf("%s: survivors or nothing spared: %+v", c.name, rep)
		}
		if ps, _ := shell(t, d, id, "ps -o pid,user,stat,args | grep chain.sh | grep -v grep; exit 0"); ps != "" {
			t.Errorf("%s: chains left after the sweep:\n%s", c.name, ps)
		}
		if got := env(); got != daemon {
			t.Errorf("%s: the environment's process %s is gone (now %q)", c.name, daemon, got)
		}
	}
}

func TestInitStopsOnTerm(t *testing.T) {
	d := newDocker(t)
	id := trialContainer(t, d)
	// A TERM in the first milliseconds, before main has asked for it (Go
	// runs every package's init first), ends a Go PID 1 with status 2; a
	// trial never stops a container that early. Wait until init runs: it
	// makes itself undumpable first, and then root without CAP_SYS_PTRACE
	// may no longer read its environment.
	if out, code := shell(t, d, id, `for i in $(seq 200); do cat /proc/1/environ >/dev/null 2>&1 || exit 0; sleep 0.05; done; exit 1`); code != 0 {
		t.Fatalf("init did not start within 10 s: %s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait, errs := d.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	start := time.Now()
	if err := d.cli.ContainerKill(ctx, id, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-wait:
		if w.StatusCode != 0 || time.Since(start) > 5*time.Second {
			t.Errorf("init exited with %d after %v", w.StatusCode, time.Since(start))
		}
	case err := <-errs:
		t.Fatal(err)
	}
}

func TestImage(t *testing.T) {
	d := newDocker(t)
	ctx := context.Background()
	dir := t.TempDir()
	marker := runID + "-" + t.Name()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM busybox\nRUN echo "+marker+" > /built\nWORKDIR /srv/task\n"), 0o644)
	var imgs [3]runtime.Image
	var tags [3]string
	var errs [3]error
	var wg sync.WaitGroup
	for i := range tags {
		wg.Go(func() {
			imgs[i], errs[i] = d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}})
			tags[i] = imgs[i].Ref
		})
	}
	wg.Wait()
	t.Cleanup(func() { d.RemoveImage(context.Background(), tags[0]) })
	for i := range tags {
		if errs[i] != nil || tags[i] != tags[0] || !strings.HasPrefix(tags[i], ImageTagPrefix) {
			t.Fatalf("concurrent builds of one folder: %v %v", tags, errs)
		}
	}
	start := time.Now()
	if img, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}}); err != nil || img.Ref != tags[0] || time.Since(start) > 2*time.Second {
		t.Errorf("an unchanged folder must not be built again: %s %v (%v)", img.Ref, err, time.Since(start))
	}
	if imgs[0].WorkDir != "/srv/task" {
		t.Errorf("the image's working folder is %q, want /srv/task", imgs[0].WorkDir)
	}
	id := runtimetest.Started(t, d, cfg(), runtime.ContainerSpec{Image: tags[0]}).ID()
	if out, _ := shell(t, d, id, "cat /built"); strings.TrimSpace(out) != marker {
		t.Errorf("built image holds %q", out)
	}

	// A failing build quotes its step and output.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "Dockerfile"), []byte("FROM busybox\nRUN echo "+marker+"-about-to-fail && exit 3\n"), 0o644)
	_, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: bad}})
	be, ok := errors.AsType[*BuildError](err)
	if !ok || !regexp.MustCompile(`^Step 2/\d+ : RUN`).MatchString(be.Step) || !strings.Contains(be.Output, "about-to-fail") || !strings.Contains(err.Error(), "non-zero code: 3") {
		t.Errorf("failed build: %v", err)
	}
	// No registry: a missing image says how to provide one.
	_, err = d.Image(ctx, runtime.ImageSpec{Image: "troupe-test/does-not-exist:" + runID})
	if !errors.Is(err, ErrImageUnavailable) || !strings.Contains(err.Error(), "docker load") {
		t.Errorf("missing image: %v", err)
	}
	if _, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: t.TempDir()}}); !errors.Is(err, ErrImageUnavailable) {
		t.Errorf("a folder without Dockerfile: %v", err)
	}
}

func TestBridgeNetwork(t *testing.T) {
	d := newDocker(t)
	ctx := context.Background()
	job := runID + "-bridge"
	var ids []string
	for _, trial := range []string{"bridge-a", "bridge-b"} {
		id := runtimetest.Started(t, d, cfg(), runtime.ContainerSpec{Network: runtime.NetworkBridge, Labels: map[string]string{runtime.LabelJob: job, runtime.LabelTrial: trial},
			Entrypoint: []string{"sh", "-c", "mkdir -p /w && echo hi > /w/index.html && exec httpd -f -p 8080 -h /w"}}).ID()
		ids = append(ids, id)
	}
	nets, _ := d.List(ctx, map[string]string{runtime.LabelJob: job})
	var shared []runtime.Resource
	for _, r := range nets {
		if r.Kind == KindNetwork {
			shared = append(shared, r)
		}
	}
	if len(shared) != 1 {
		t.Fatalf("the job's bridged containers share one network, labelled: %v", nets)
	}
	// On it, each reaches the internet's side, not the other trial.
	info, err := d.cli.ContainerInspect(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	other := info.NetworkSettings.Networks[shared[0].Name].IPAddress
	if out, code := shell(t, d, ids[0], "timeout 3 wget -qO- http://"+other+":8080/ 2>&1"); code == 0 {
		t.Errorf("a trial reached another trial's container on the job network: %q", out)
	}
	if out, code := shell(t, d, ids[1], "timeout 3 wget -qO- http://127.0.0.1:8080/ 2>&1"); code != 0 || strings.TrimSpace(out) != "hi" {
		t.Errorf("the server does not answer on its own loopback (the test would prove nothing): exit %d %q", code, out)
	}
	for _, id := range ids {
		if err := d.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if rs, _ := d.List(ctx, map[string]string{runtime.LabelJob: job}); len(rs) != 1 {
		t.Errorf("removing the containers removed the job's network, or left more: %v", rs)
	}
	if err := d.EndJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	if rs, _ := d.List(ctx, map[string]string{runtime.LabelJob: job}); len(rs) != 0 {
		t.Errorf("the job's end left %v", rs)
	}
}

const reaperChildEnv = "TROUPE_TEST_REAPER_CHILD"

// reaperChild is this test binary run as a troupe process that creates a
// container and then waits to be killed.
func reaperChild() {
	ctx := context.Background()
	d := New(os.Getenv(reaperChildEnv), nil)
	if err := d.Open(ctx); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	c, err := d.Create(ctx, runtime.ContainerSpec{Image: testImage, Entrypoint: []string{"sleep", "600"}, Labels: map[string]string{runtime.LabelJob: os.Getenv(reaperChildEnv), runtime.LabelTrial: "orphan"}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	id := c.ID()
	fmt.Println("created", id)
	select {}
}

func TestReaper(t *testing.T) {
	d := newDocker(t)
	ctx := context.Background()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), reaperChildEnv+"="+runID)
	stdout, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	id, ok := strings.CutPrefix(strings.TrimSpace(line), "created ")
	if !ok {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("child: %q", line)
	}
	// A live owner's container is left alone.
	removed, err := runtime.Reap(ctx, d, d.Owner(), runtime.ReapOptions{})
	if err != nil || slices.ContainsFunc(removed, func(r runtime.Resource) bool { return r.ID == id }) {
		t.Fatalf("reaped a live owner's container: %v %v", removed, err)
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	dry, _ := runtime.Reap(ctx, d, d.Owner(), runtime.ReapOptions{DryRun: true})
	if !slices.ContainsFunc(dry, func(r runtime.Resource) bool { return r.ID == id }) {
		t.Fatalf("a dry run does not list the dead owner's container: %v", dry)
	}
	removed, err = runtime.Reap(ctx, d, d.Owner(), runtime.ReapOptions{})
	if err != nil || !slices.ContainsFunc(removed, func(r runtime.Resource) bool { return r.ID == id }) {
		t.Fatalf("the dead owner's container was not reaped: %v %v", removed, err)
	}
	if rs, _ := d.List(ctx, map[string]string{runtime.LabelTrial: "orphan", runtime.LabelJob: runID}); len(rs) != 0 {
		t.Errorf("still there: %v", rs)
	}
}

// TestRemoveTogether: two troupe processes (a run's reaper and troupe
// clean) removing the same containers at once. Each removal succeeds, and
// only once the container is gone: the one that finds a removal already in
// progress waits for it instead of failing.
func TestRemoveTogether(t *testing.T) {
	d := newDocker(t)
	ctx := context.Background()
	for round := range 3 {
		c, err := d.Create(ctx, runtime.ContainerSpec{Image: testImage, Entrypoint: []string{"sleep", "600"}, Labels: map[string]string{runtime.LabelJob: runID, runtime.LabelTrial: "remove-together"}})
		if err != nil {
			t.Fatal(err)
		}
		id := c.ID()
		if err := d.Container(id).Start(ctx); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Go(func() {
				if errs[i] = d.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: id}); errs[i] != nil {
					return
				}
				if _, err := d.cli.ContainerInspect(ctx, id); !cerrdefs.IsNotFound(err) {
					errs[i] = fmt.Errorf("Remove returned while the container is still there: %v", err)
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, remover %d: %v", round, i, err)
			}
		}
	}
}

func TestCopyOutRefusesEscapes(t *testing.T) {
	d := newDocker(t)
	id := runtimetest.Started(t, d, cfg(), runtime.ContainerSpec{}).ID()
	shell(t, d, id, "mkdir -p /out && echo x > /out/ok && ln -s / /out/root")
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	skipped, err := d.Container(id).CopyOut(context.Background(), "/out", root, "../escape", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
		t.Error("CopyOut wrote outside its destination")
	}
	if len(skipped) == 0 {
		t.Error("entries whose path leaves the destination must be skipped and listed")
	}
}

// The binary comes from a read-only volume, filled once per digest.
func TestBinaryVolume(t *testing.T) {
	d := newDocker(t)
	for i := range 2 {
		start := time.Now()
		id := runtimetest.Started(t, d, cfg(), runtime.ContainerSpec{Image: testImage, Entrypoint: []string{runtime.BinaryPath, "init"}, Binary: testBinary}).ID()
		if i == 1 && time.Since(start) > 5*time.Second {
			t.Errorf("the second container took %s: the volume was filled again?", time.Since(start))
		}
		out, code := shell(t, d, id, runtime.BinaryPath+" version && (echo x > "+runtime.BinaryPath+") 2>&1; echo wrote=$?")
		if code != 0 || !strings.HasPrefix(out, "troupe ") || !strings.Contains(out, "Read-only file system") || !strings.Contains(out, "wrote=1") {
			t.Errorf("container %d: %q (exit %d)", i, out, code)
		}
	}
	name := d.binaryVolumeName(testBinary)
	for _, v := range []string{name, name + "-ok"} {
		if _, err := d.cli.VolumeInspect(t.Context(), v); err != nil {
			t.Errorf("volume %s: %v", v, err)
		}
	}
}
