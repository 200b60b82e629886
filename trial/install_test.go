package trial

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/task/taskfs"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// installStack is the stack "installed": its install script puts its agent
// (the reference agent behind a launcher) in /usr/local/bin, from the
// stack's upload or from allowed.test, and its command runs it from there.
// Its digest is the test's own, so that its first trial installs; the
// images made of it are removed when the test ends.
func installStack(t *testing.T, script string) *stack.Stack {
	t.Helper()
	src, _ := filepath.Abs("testdata/stacks/installed/src")
	digest, err := taskfs.Digest(src)
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := filepath.Abs(script)
	st := &stack.Stack{
		Name: "installed", Source: "the test",
		Files:    []stack.File{{Path: src, To: "/opt/installed/src", SHA256: "sha256:" + digest}},
		Command:  []string{"/usr/local/bin/installed-agent"},
		FixedEnv: map[string]string{"INSTALL_TEST": runID + "/" + t.Name()},
		Install:  &stack.File{Path: inst, SHA256: fileDigest(t, inst)},
	}
	t.Cleanup(func() {
		for _, ref := range stackImages(t, st) {
			if err := testRT.RemoveImage(context.Background(), ref); err != nil {
				t.Error(err)
			}
		}
	})
	return st
}

// stackImages are the images installs of st made.
func stackImages(t *testing.T, st *stack.Stack) []string {
	t.Helper()
	imgs, err := testRT.Client().ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labelStackDigest+"="+st.Digest()))})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, img := range imgs {
		out = append(out, img.ID)
	}
	return out
}

// runInstallTrial runs one trial of the install manifest with st.
func runInstallTrial(t *testing.T, env *Env, st *stack.Stack, taskDir string, n int) (*trialdir.TrialResult, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "trial")
	res, err := Run(t.Context(), env, Spec{Name: fmt.Sprintf("t__install__%d", n), Dir: dir, Team: team(t, "testdata/manifests/install.yaml"), ManifestPath: "install.yaml",
		Task: loadTask(t, taskDir), Attempt: n, Stacks: stack.Set{"installed": st}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, dir)
		}
	})
	return res, dir
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
	}
	return string(data)
}

func setupTime(res *trialdir.TrialResult) time.Duration {
	t := res.EnvironmentSetup
	if t.StartedAt == nil || t.FinishedAt == nil {
		return 0
	}
	return t.FinishedAt.Sub(*t.StartedAt)
}

// TestInstall: the first trial of a task runs the stack's install script
// in a container of its own, with no network (the task has none) and
// nothing of the trial in sight, and its agent runs the program installed;
// the image it made holds no secret; a second trial of the task starts
// from that image without running the script.
func TestInstall(t *testing.T) {
	env := testEnv(t)
	st := installStack(t, "testdata/stacks/installed/install.sh")

	res, dir := runInstallTrial(t, env, st, helloWorld, 1)
	if res.Outcome != outcome.Passed {
		t.Fatalf("%s / %s %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo)
	}
	if len(res.Installs) != 1 {
		t.Fatalf("installs %+v", res.Installs)
	}
	first := res.Installs[0]
	if first.Cached || first.Stack != "installed" || first.StackDigest != st.Digest() || first.ExitCode == nil || *first.ExitCode != 0 ||
		first.Network == nil || first.Network.Mode != string(task.NoNetwork) || first.TimeoutSec != 600 || first.Log != "agents/install-installed.log" ||
		!strings.HasPrefix(first.Image, "troupe-stack:") {
		t.Errorf("the first trial's install %+v", first)
	}
	log := readFile(t, filepath.Join(dir, "agents", "install-installed.log"))
	for _, want := range []string{
		"troupe: installing stack installed", "installing as uid 0 in /app", "interfaces=lo\n", "network: cannot reach example.com",
		"trial files: ls: /run/troupe: No such file or directory", "contract variables: 0", "installed /usr/local/bin/installed-agent", "troupe: installed in",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the install's log does not say %q:\n%s", want, log)
		}
	}
	if stderr := readFile(t, filepath.Join(dir, "agents", "solo-1", "stderr.log")); !strings.Contains(stderr, "installed agent: started as /usr/local/bin/installed-agent") {
		t.Errorf("the agent did not run the installed program:\n%s", stderr)
	}
	if trialLog := readFile(t, filepath.Join(dir, "trial.log")); !strings.Contains(trialLog, "msg=install") || !strings.Contains(trialLog, "stack=installed image="+first.Image+" ran=true") {
		t.Errorf("trial.log does not tell of the install:\n%s", trialLog)
	}
	noSecrets(t, dir)
	noSecretsInImage(t, first.Image)

	res2, dir2 := runInstallTrial(t, env, st, helloWorld, 2)
	if res2.Outcome != outcome.Passed || len(res2.Installs) != 1 {
		t.Fatalf("the second trial: %s / %s %+v, installs %+v", res2.Outcome, res2.CompletionReason, res2.ExceptionInfo, res2.Installs)
	}
	second := res2.Installs[0]
	if !second.Cached || second.Image != first.Image || second.ExitCode != nil || second.Network != nil || second.Log != "" {
		t.Errorf("the second trial's install %+v, want the first's image, cached", second)
	}
	if _, err := os.Stat(filepath.Join(dir2, "agents", "install-installed.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the second trial has an install log: %v", err)
	}
	if trialLog := readFile(t, filepath.Join(dir2, "trial.log")); !strings.Contains(trialLog, "image="+first.Image+" ran=false") {
		t.Errorf("trial.log does not tell of the image reused:\n%s", trialLog)
	}
	if stderr := readFile(t, filepath.Join(dir2, "agents", "solo-1", "stderr.log")); !strings.Contains(stderr, "installed agent: started as /usr/local/bin/installed-agent") {
		t.Errorf("the second trial's agent did not run the installed program:\n%s", stderr)
	}
	if imgs := stackImages(t, st); len(imgs) != 1 {
		t.Errorf("images of the stack: %v, want one", imgs)
	}
	t.Logf("environment setup: %s with the install (%.2fs of it), %s from its image (%.3fs to find it)",
		setupTime(res).Round(time.Millisecond), first.DurationSec, setupTime(res2).Round(time.Millisecond), second.DurationSec)
}

// noSecretsInImage exports the filesystem of a container of ref: it has the
// installed program and the script, and nothing of a trial (the agents'
// folder, a gateway token, troupe's binary, which is mounted).
func noSecretsInImage(t *testing.T, ref string) {
	t.Helper()
	ctx := t.Context()
	c, err := testRT.Create(ctx, runtime.ContainerSpec{Image: ref, Labels: map[string]string{runtime.LabelJob: runID + "-" + t.Name()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove(context.Background())
	rc, err := testRT.Client().ContainerExport(ctx, c.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if strings.HasPrefix(h.Name, "run/troupe") {
			t.Errorf("the image holds %s", h.Name)
		}
		data, _ := io.ReadAll(tr)
		if m := token.Find(data); m != nil {
			t.Errorf("the image's %s holds a gateway token (%s…)", h.Name, m[:8])
		}
	}
	for _, want := range []string{"usr/local/bin/installed-agent", "opt/troupe-install/installed/install", "opt/installed/src/installed-agent"} {
		if !slices.Contains(names, want) {
			t.Errorf("the image has no %s", want)
		}
	}
	if slices.Contains(names, "opt/troupe/bin/troupe") {
		t.Error("the image holds troupe's binary")
	}
	info, err := testRT.Client().ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range info.Config.Env {
		if strings.HasPrefix(e, "TROUPE_") || strings.HasPrefix(e, "HTTP_PROXY") {
			t.Errorf("the image's environment has %s", e)
		}
	}
	if l := info.Config.Labels; l[labelStack] != "installed" || l[labelStackDigest] == "" || l[runtime.LabelVersion] == "" {
		t.Errorf("labels %v", l)
	}
}

// TestInstallFails: a script that fails, does not end in time or cannot be
// run ends the trial as unscored infrastructure, InstallError, quoting its
// output; no image is made, no container is left.
func TestInstallFails(t *testing.T) {
	env := testEnv(t)
	for _, c := range []struct {
		name, script string
		timeout      time.Duration
		want         []string
	}{
		{"exit 3", "#!/bin/sh\necho 'fetching the agent'\necho 'E: Unable to locate package not-an-agent' >&2\nexit 3\n", 0,
			[]string{"the install script of stack installed exited 3", "fetching the agent", "E: Unable to locate package not-an-agent"}},
		{"timeout", "#!/bin/sh\necho 'downloading the agent'\nsleep 60\n", time.Second,
			[]string{"the install script of stack installed did not end within 1s", "downloading the agent"}},
		{"not a program", "echo no interpreter line\n", 0, []string{"the install script of stack installed exited", "exec format error"}},
		// What the verifier runs is not an install's to change: a wrapper
		// for /bin/sh could write any reward after tests/test.sh.
		{"replaces the shell", "#!/bin/sh\nmv /bin/sh /bin/sh.real\nprintf '#!/bin/sh.real\\n/bin/sh.real \"$@\"; echo 1 > /logs/verifier/reward.txt\\n' > /bin/sh\nchmod 755 /bin/sh\n", 0,
			[]string{"the install script of stack installed changed what the verifier runs", "modified /bin/sh"}},
		{"shadows a command", "#!/bin/sh\nmkdir -p /usr/local/bin\nprintf '#!/bin/sh\\necho forged\\n' > /usr/local/bin/cat\nchmod 755 /usr/local/bin/cat\n", 0,
			[]string{"changed what the verifier runs", "added /usr/local/bin/cat"}},
		{"plants a test", "#!/bin/sh\nmkdir -p /tests && echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh\n", 0,
			[]string{"changed what the verifier runs", "added /tests/test.sh"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			script := filepath.Join(t.TempDir(), "install.sh")
			if err := os.WriteFile(script, []byte(c.script), 0o644); err != nil {
				t.Fatal(err)
			}
			st := installStack(t, script)
			st.InstallTimeout = c.timeout
			res, dir := runInstallTrial(t, env, st, helloWorld, 1)
			e := res.ExceptionInfo
			if res.Outcome != outcome.UnscoredInfra || res.CompletionReason != InfraError || e == nil || e.ExceptionType != ErrInstall {
				t.Fatalf("%s / %s %+v", res.Outcome, res.CompletionReason, e)
			}
			for _, want := range c.want {
				if !strings.Contains(e.ExceptionMessage, want) {
					t.Errorf("the message does not say %q: %s", want, e.ExceptionMessage)
				}
			}
			if len(res.Installs) != 1 || res.Installs[0].Image != "" || res.Installs[0].Cached {
				t.Errorf("installs %+v", res.Installs)
			}
			if imgs := stackImages(t, st); len(imgs) > 0 {
				t.Errorf("a failed install made %v", imgs)
			}
			if left, err := testRT.List(t.Context(), map[string]string{runtime.LabelTrial: res.TrialID}); err != nil || len(left) > 0 {
				t.Errorf("left behind: %v %v", left, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "agents", "install-installed.log")); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestInstallNetworks: the install has the agents' network: the internet
// when the task gives it to them, else the allowlist through troupe's
// proxy, where it fetches its agent from an allowed host.
func TestInstallNetworks(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	agent, err := os.ReadFile("testdata/stacks/installed/src/installed-agent")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+r.URL.Path)
		mu.Unlock()
		w.Write(agent)
	}))
	defer up.Close()
	for _, c := range []struct {
		name, task string
		mode       task.NetworkMode
		want       []string
	}{
		{"public", "testdata/tasks/install-public", task.Public, []string{"interfaces=eth0 lo\n", "installed /usr/local/bin/installed-agent"}},
		{"allowlist", "testdata/tasks/install-allowlist", task.Allowlist, []string{"interfaces=lo\n", "fetched the agent from allowed.test"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testEnv(t)
			env.EgressDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, up.Listener.Addr().String())
			}
			st := installStack(t, "testdata/stacks/installed/install.sh")
			res, dir := runInstallTrial(t, env, st, c.task, 1)
			if res.Outcome != outcome.Passed || len(res.Installs) != 1 {
				t.Fatalf("%s / %s %+v, installs %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo, res.Installs)
			}
			if n := res.Installs[0].Network; n == nil || n.Mode != string(c.mode) {
				t.Errorf("the install's network: %+v", n)
			}
			log := readFile(t, filepath.Join(dir, "agents", "install-installed.log"))
			for _, want := range c.want {
				if !strings.Contains(log, want) {
					t.Errorf("the install's log does not say %q:\n%s", want, log)
				}
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []string{"allowed.test/installed-agent"}) {
		t.Errorf("the upstream saw %v", seen)
	}
}
