//go:build linux

package inside

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A sidecar (a task's compose service) runs its own image and its own
// first process, not troupe init: its sweep cannot end every process, as
// the service must live on for the verifier. It ends what was not there
// when the agents started instead: ListService takes that baseline, and
// SweepService spares it.

// ProcKey names one process for the life of the container: its PID and
// its start time (in clock ticks since boot), so that a PID reused by a
// newcomer is not mistaken for the process that had it.
type ProcKey struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Baseline is a sidecar's processes before the agents start: what its
// sweep spares.
type Baseline struct {
	Procs []ProcKey `json:"procs"`
	// Main, in a trial container, is the image's entrypoint (troupe
	// init's main process, a subreaper) when it runs: its descendants are
	// the environment's too, whenever they started.
	Main *ProcKey `json:"main,omitempty"`
}

// ErrNotInService refuses a service sweep where it could reach processes
// that are not a sidecar's: on a host (in the first PID namespace), or in
// a trial container (whose sweep is Sweep).
var ErrNotInService = errors.New("sweep --service: not in a service container; refusing to signal every process")

// ListService lists the sidecar's processes but the calling one: the
// baseline a later SweepService spares.
func ListService() (Baseline, error) {
	if err := checkServiceContainer(); err != nil {
		return Baseline{}, err
	}
	return listBaseline()
}

// listBaseline lists the container's processes, PID 1's included, but
// the calling one, each by pid and start time.
func listBaseline() (Baseline, error) {
	self := os.Getpid()
	b := Baseline{Procs: []ProcKey{}}
	if k, ok := procKey(1); ok {
		b.Procs = append(b.Procs, k)
	}
	ps, err := live(self)
	if err != nil {
		return b, err
	}
	for _, p := range ps {
		if k, ok := procKey(p.PID); ok {
			b.Procs = append(b.Procs, k)
		}
	}
	return b, nil
}

// SweepService ends every process of a sidecar that is not in base (and
// is not the sweep itself): TERM to each, up to grace for them to exit;
// then a STOP to every process of the PID namespace at once (kill(-1),
// which no fork escapes, as in Sweep), so that no newcomer can start
// another while it is listed; a KILL to each newcomer, listed again until
// none is left (only PID 1, which kill(-1) spares, can still fork); and a
// CONT to every process, so that the service runs on for the verifier.
// Newcomers that are still there after killTimeout are Survivors.
//
// A process the service itself started after the baseline (a worker for
// each connection) is a newcomer too: it is ended like the agents'.
func SweepService(ctx context.Context, base Baseline, grace time.Duration) (Report, error) {
	var rep Report
	if err := checkServiceContainer(); err != nil {
		return rep, err
	}
	if len(base.Procs) == 0 {
		return rep, errors.New("sweep --service: an empty baseline: the service's own processes are unknown")
	}
	keep := make(map[ProcKey]bool, len(base.Procs))
	for _, k := range base.Procs {
		keep[k] = true
	}
	self := os.Getpid()
	newcomers := func() ([]Proc, error) {
		ps, err := live(self)
		if err != nil {
			return nil, err
		}
		out := ps[:0]
		for _, p := range ps {
			if k, ok := procKey(p.PID); ok && !keep[k] {
				out = append(out, p)
			}
		}
		return out, nil
	}
	targets, err := newcomers()
	if err != nil {
		return rep, err
	}
	if len(targets) == 0 {
		return rep, nil
	}
	rep.Signalled = terminate(ctx, targets, grace)

	// Freeze, kill what is new, thaw: the CONT is sent whatever happens.
	if err := unix.Kill(-1, unix.SIGSTOP); err != nil && !errors.Is(err, unix.ESRCH) {
		return rep, fmt.Errorf("sweep --service: stop every process: %w", err)
	}
	killErr := killNewcomers(ctx, &rep, newcomers)
	if err := unix.Kill(-1, unix.SIGCONT); err != nil && !errors.Is(err, unix.ESRCH) {
		killErr = errors.Join(killErr, fmt.Errorf("sweep --service: continue every process: %w", err))
	}
	if killErr != nil {
		rep.bound()
		return rep, killErr
	}
	rep.Survivors, err = awaitGone(ctx, newcomers, killTimeout)
	rep.bound()
	return rep, err
}

// killNewcomers KILLs each newcomer while every process but PID 1 is
// stopped, listing them again until a listing finds none (PID 1 may still
// fork) or killTimeout passes.
func killNewcomers(ctx context.Context, rep *Report, newcomers func() ([]Proc, error)) error {
	deadline := time.Now().Add(killTimeout)
	killed := map[ProcKey]bool{}
	for {
		left, err := newcomers()
		if err != nil {
			return err
		}
		fresh := 0
		for _, p := range left {
			k, ok := procKey(p.PID)
			if !ok || killed[k] {
				continue // gone, or dying of an earlier KILL
			}
			if unix.Kill(p.PID, unix.SIGKILL) != nil {
				continue
			}
			killed[k] = true
			fresh++
			markKilled(rep, p)
		}
		if fresh == 0 || ctx.Err() != nil || time.Now().After(deadline) {
			return nil // what is left is dying: awaitGone waits for it
		}
	}
}

func indexPID(ps []Proc, pid int) int {
	for i, p := range ps {
		if p.PID == pid {
			return i
		}
	}
	return -1
}

// checkServiceContainer makes sure kill(-1) reaches a sidecar's processes
// only: not the first PID namespace (where kthreadd is PID 2 and kill(-1)
// would reach every process of the user on the host), and not a trial
// container (PID 1 troupe init: its sweep is Sweep, which spares nothing).
func checkServiceContainer() error {
	if os.Getpid() == 1 {
		return ErrNotInService
	}
	if p, _, ok := readProc(2); ok && p.Cmd == "[kthreadd]" {
		return ErrNotInService
	}
	if p, _, ok := readProc(1); ok && IsTroupe(p, "init") {
		return ErrNotInService
	}
	return nil
}

// procKey reads a process's start time from /proc/PID/stat (field 22).
func procKey(pid int) (ProcKey, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcKey{}, false
	}
	start, ok := statStart(stat)
	return ProcKey{PID: pid, Start: start}, ok
}

// statStart reads the start time field of a /proc stat line: the 20th
// field after the command, which is in parentheses and may hold ") ".
func statStart(stat []byte) (uint64, bool) {
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	return n, err == nil
}
