//go:build linux

package inside

import (
	"os/exec"
	"slices"
	"testing"
	"time"
)

// TestSweepOwnChildren sweeps only the processes this test starts: a sweep
// that spared nothing would signal everything the test's user may signal.
func TestSweepOwnChildren(t *testing.T) {
	plain := exec.Command("sleep", "300")
	stubborn := exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 1; done`)
	for _, c := range []*exec.Cmd{plain, stubborn} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		go c.Wait() // reap them, as init would
	}
	mine := []int{plain.Process.Pid, stubborn.Process.Pid}
	time.Sleep(100 * time.Millisecond) // let the shell install its trap
	start := time.Now()
	rep, err := Sweep(t.Context(), 500*time.Millisecond, func(p Proc) bool { return !slices.Contains(mine, p.PID) })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Signalled) != 2 || len(rep.Survivors) != 0 {
		t.Fatalf("report %+v", rep)
	}
	for _, p := range rep.Signalled {
		if want := p.PID == stubborn.Process.Pid; p.Kill != want {
			t.Errorf("%+v: killed %v, want %v", p, p.Kill, want)
		}
	}
	if elapsed := time.Since(start); elapsed < 500*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("the sweep took %v with a 500ms grace", elapsed)
	}
}

func TestIsTroupe(t *testing.T) {
	for cmd, want := range map[string]bool{
		"/opt/troupe/bin/troupe tunnel --listen x=y": true,
		"troupe tunnel":                true,
		"/opt/troupe/bin/troupe agent": false,
		"sh -c troupe tunnel":          false,
		"":                             false,
	} {
		if got := IsTroupe(Proc{Cmd: cmd}, "tunnel"); got != want {
			t.Errorf("%q: %v", cmd, got)
		}
	}
}
