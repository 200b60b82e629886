package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/docker"
	"github.com/troupebench/troupe/runtime/staticbin"
)

// stressCPU keeps n busy loops running, each in a process of its own, until
// the test ends: the load average of a shared CI machine, where the Docker
// Engine answers late and the killed troupe's last requests land after the
// next one has started.
func stressCPU(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start a busy loop: %v", err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
}

// ownedBy lists the troupe resources whose owner label names pid.
func ownedBy(t *testing.T, rt *docker.Docker, pid int) []runtime.Resource {
	t.Helper()
	all, err := rt.List(context.Background(), map[string]string{runtime.LabelOwner: ""})
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Resource
	for _, r := range all {
		if o, err := runtime.ParseOwner(r.Labels[runtime.LabelOwner]); err == nil && o.PID == pid {
			out = append(out, r)
		}
	}
	return out
}

// builtTroupe builds troupe's static binary, opens the Docker Engine the
// test looks at, and writes a config whose mock/slow endpoint takes a few
// seconds a trial; the binary's volume goes when the test ends.
func builtTroupe(t *testing.T) (bin string, rt *docker.Docker, config string) {
	t.Helper()
	bin = filepath.Join(t.TempDir(), "troupe")
	if err := staticbin.Build(t.Context(), "../..", bin); err != nil {
		t.Fatal(err)
	}
	rt = docker.New("test", nil)
	if err := rt.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	t.Cleanup(func() {
		if b, err := staticbin.Load(bin); err == nil {
			rt.RemoveBinaryVolume(context.Background(), b)
		}
	})
	scenario, _ := filepath.Abs("../../trial/testdata/scenarios/slow.yaml")
	config = filepath.Join(t.TempDir(), "troupe.yaml")
	write(t, config, "endpoints:\n  mock/slow:\n    api: mock\n    scenario: "+scenario+"\n")
	return bin, rt, config
}

// TestRunKilledUnderLoad runs the real binary on a machine kept busy
// (4 busy loops per CPU): troupe run is killed with SIGKILL while its
// first containers are being created, and not yet waited for; troupe
// clean --dry-run then lists every container and network it left, and the
// same command run again leaves nothing of the killed run once it has
// finished.
func TestRunKilledUnderLoad(t *testing.T) {
	bin, rt, config := builtTroupe(t)
	out := filepath.Join(t.TempDir(), "killed-job")
	args := []string{"run", "--config", config, "trial/testdata/manifests/slow.yaml", "--tasks", "examples/tasks/hello-world", "-k", "8", "-n", "4", "--out", out}

	stressCPU(t, 4*goruntime.NumCPU())
	cmd := exec.Command(bin, args...)
	cmd.Dir = "../.."
	var output syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := cmd.Process.Pid
	// Whatever the test leaves of the killed run goes, whatever it asserts.
	t.Cleanup(func() {
		for _, r := range ownedBy(t, rt, killed) {
			rt.Remove(context.Background(), r)
		}
	})
	// SIGKILL as soon as its first trial's container exists (not a helper
	// container such as the binary volume's filler, which goes by itself):
	// the other trials' containers are being created.
	trialContainer := func(r runtime.Resource) bool {
		return r.Kind == runtime.KindContainer && r.Labels[runtime.LabelTrial] != ""
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !slices.ContainsFunc(ownedBy(t, rt, killed), trialContainer) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no container appeared:\n%s", output.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The killer has not waited for it yet (a loaded machine's shell or CI
	// harness gets to it late): until the rerun has ended, it is a zombie,
	// with its pid and start time.
	cmd.Process.Signal(syscall.SIGKILL)
	var reaped bool
	t.Cleanup(func() {
		if !reaped {
			cmd.Wait()
		}
	})
	left := ownedBy(t, rt, killed)
	if len(left) == 0 {
		t.Fatal("SIGKILL left nothing to clean: the test proves nothing")
	}
	t.Logf("left by the killed run: %v", left)

	clean := exec.Command(bin, "clean", "--dry-run")
	clean.Dir = "../.."
	dry, err := clean.CombinedOutput()
	if err != nil {
		t.Fatalf("troupe clean --dry-run: %v\n%s", err, dry)
	}
	// Another test's troupe run may reap some of it meanwhile: what is
	// there before and after the dry run must be listed.
	still := ownedBy(t, rt, killed)
	for _, r := range left {
		there := slices.ContainsFunc(still, func(s runtime.Resource) bool { return s.ID == r.ID })
		if there && !strings.Contains(string(dry), fmt.Sprintf("would remove %s (owner %s", r, r.Labels[runtime.LabelOwner])) {
			t.Errorf("troupe clean --dry-run does not list %s of the killed run:\n%s", r, dry)
		}
	}

	rerun := exec.Command(bin, args...)
	rerun.Dir = "../.."
	again, err := rerun.CombinedOutput()
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, again)
	}
	cmd.Wait()
	reaped = true
	if still := ownedBy(t, rt, killed); len(still) > 0 {
		t.Errorf("after the rerun, left of the killed run: %v\nrerun said:\n%s", still, again)
	}
	if mine := ownedBy(t, rt, rerun.Process.Pid); len(mine) > 0 {
		t.Errorf("the rerun left its own: %v", mine)
	}
	if !strings.Contains(string(again), "test-slow  8       8") {
		t.Errorf("the rerun did not finish the job:\n%s", again)
	}
	os.RemoveAll(out)
}

// TestRunStopsWithGoRun: troupe started by go run (a go-build folder, a
// parent named go) and go killed with SIGKILL: troupe stops as on a first
// Ctrl+C instead of running on unseen, and removes its containers.
func TestRunStopsWithGoRun(t *testing.T) {
	built, rt, config := builtTroupe(t)
	// go run's layout: the binary under $WORK/go-build…/b001/exe, go its
	// parent (here a script of that name, which does not exec).
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "go-build123", "b001", "exe", "troupe")
	data, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	gocmd := filepath.Join(tmp, "fake", "go")
	write(t, gocmd, "#!/bin/sh\n\"$@\"\nexit $?\n")
	os.Chmod(gocmd, 0o755)

	out := filepath.Join(t.TempDir(), "gorun-job")
	cmd := exec.Command(gocmd, bin, "run", "--config", config, "trial/testdata/manifests/slow.yaml", "--tasks", "examples/tasks/hello-world", "-k", "8", "-n", "2", "--out", out)
	cmd.Dir = "../.."
	var output syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait() // returns once troupe, which holds the output, is gone too
		close(exited)
	}()
	// troupe's pid is in its containers' owner label.
	pid := 0
	t.Cleanup(func() {
		if pid != 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		<-exited
		if pid != 0 {
			for _, r := range ownedBy(t, rt, pid) {
				rt.Remove(context.Background(), r)
			}
		}
	})
	for deadline := time.Now().Add(3 * time.Minute); pid == 0; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("troupe ended before it was killed:\n%s", output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no container appeared:\n%s", output.String())
		}
		all, _ := rt.List(t.Context(), map[string]string{runtime.LabelOwner: ""})
		for _, r := range all {
			if o, err := runtime.ParseOwner(r.Labels[runtime.LabelOwner]); err == nil && strings.HasPrefix(r.Labels[runtime.LabelJob], "gorun-job-") {
				pid = o.PID
			}
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(5 * time.Minute):
		t.Fatalf("troupe still runs 5 minutes after go run was killed:\n%s", output.String())
	}
	if !strings.Contains(output.String(), "stopping: cancelling the running trials") {
		t.Errorf("troupe did not stop when go run was killed:\n%s", output.String())
	}
	if left := ownedBy(t, rt, pid); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	os.RemoveAll(out)
}
