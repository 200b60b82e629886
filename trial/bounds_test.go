package trial

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// floodTask copies testdata/tasks/flood with the flooder program built into
// its image.
func floodTask(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "flood")
	if err := os.CopyFS(dir, os.DirFS("testdata/tasks/flood")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "environment", "flooder"), "./testdata/flooder")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the flooder: %v\n%s", err, out)
	}
	return dir
}

// openFiles counts this process's descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestOneTrialCannotStarveAnother: an agent holds 4,600 connections to the
// relay (upgraded and never authenticated, or stalled in their request) and
// 3,000 to the gateway (idle, or stalled in a request's body) through its
// tunnel, opening a new one whenever one is closed, and declares done with
// all of them open. Another trial of the same job, started while they are
// held, passes; troupe's descriptors stay bounded; the flooding trial's
// teardown takes seconds, and its result counts what its tunnel refused.
func TestOneTrialCannotStarveAnother(t *testing.T) {
	env := testEnv(t)
	floodDir := floodTask(t)
	base := openFiles(t)

	var (
		wg        sync.WaitGroup // the flooding trial
		sampler   sync.WaitGroup
		mu        sync.Mutex
		peak      int
		floodRes  *trialdir.TrialResult
		floodErr  error
		executing = make(chan struct{})
		once      sync.Once
		stop      = make(chan struct{})
	)
	sampler.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				n := openFiles(t)
				mu.Lock()
				peak = max(peak, n)
				mu.Unlock()
			}
		}
	})
	tm := team(t, "testdata/manifests/attack-starve.yaml")
	spec := Spec{Name: "flood__test-attack-starve__1", Dir: filepath.Join(t.TempDir(), "flood"), Team: tm,
		ManifestPath: "testdata/manifests/attack-starve.yaml", Task: loadTask(t, floodDir), Attempt: 1}
	wg.Go(func() {
		defer once.Do(func() { close(executing) })
		floodRes, floodErr = Run(t.Context(), env, spec, func(e Event) {
			if e.Type == EventPhase && e.Phase == "agent_execution" {
				once.Do(func() { close(executing) })
			}
		})
	})
	<-executing
	// The flood builds for a few seconds: the other trial starts into it.
	time.Sleep(8 * time.Second)
	mu.Lock()
	during := peak
	mu.Unlock()
	t.Logf("descriptors: %d before, %d after the flood started", base, during)

	res, _ := runTrial(t, env, "../examples/manifests/solo.yaml", helloWorld)
	if res.Outcome != outcome.Passed {
		t.Errorf("the other trial: %s (%s): %+v", res.Outcome, res.CompletionReason, res.ExceptionInfo)
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	if floodErr != nil {
		t.Fatal(floodErr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, spec.Dir)
		}
	})
	mu.Lock()
	t.Logf("descriptors: %d at most", peak)
	if peak-base > 2000 {
		t.Errorf("troupe's descriptors rose from %d to %d", base, peak)
	}
	mu.Unlock()
	if floodRes.CompletionReason != DeclaredDone {
		t.Errorf("the flooding trial ended with %s: %+v", floodRes.CompletionReason, floodRes.ExceptionInfo)
	}
	if floodRes.Tunnel == nil || floodRes.Tunnel.Streams["relay"].Refused == 0 || floodRes.Tunnel.Streams["llm"].Refused == 0 ||
		floodRes.Tunnel.Streams["relay"].Peak > 64 || floodRes.Tunnel.Streams["llm"].Peak > 256 {
		t.Errorf("the flooding trial's tunnel counts: %+v", floodRes.Tunnel)
	}
	teardown := floodRes.FinishedAt.Sub(*floodRes.AgentExecution.FinishedAt)
	t.Logf("the flooding trial's end (sweep to removal): %s", teardown)
	if teardown > 30*time.Second {
		t.Errorf("the flooding trial took %s from its agents' end to its result", teardown)
	}
}
