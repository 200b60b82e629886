//go:build linux

// Package inside is troupe's code that runs inside a trial container, as
// subcommands of the same static binary: Init is PID 1 (it reaps orphaned
// processes and idles until told to stop), Sweep ends every agent process at
// the end of a trial (TERM, a grace period, then one KILL to every process
// of the container at once) and reports what survived. The tunnel's container end is in runtime/tunnel.
package inside

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/troupebench/troupe/internal/clip"
	"golang.org/x/sys/unix"
)

// Init runs as the container's PID 1 until ctx ends (the caller cancels it
// on SIGTERM): agents' orphaned children are reparented to it, and it reaps
// them so they never pile up as zombies. With a main process (the image's
// ENTRYPOINT and command, main.go) it starts it first, as its child, and
// records its output and its end; nil or an empty command starts nothing.
func Init(ctx context.Context, main *Main) error {
	if err := Undumpable(); err != nil {
		return err
	}
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	var mp *mainProc
	if main != nil && len(main.Cmd) > 0 {
		mp = startMain(*main)
		defer mp.close()
	}
	reap(mp)
	for {
		select {
		case <-ctx.Done():
			reap(mp)
			return nil
		case <-chld:
			reap(mp)
		}
	}
}

// Undumpable makes the calling process non-dumpable: without
// CAP_SYS_PTRACE (which trial containers do not grant), no other process
// may ptrace it or read its memory, even one of the same uid. troupe's own
// processes in a container — init, the tunnel, the sweep — run as root,
// like agents with agent_user: root; this keeps such an agent from running
// its code inside them, where a sweep would spare it.
func Undumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the process non-dumpable: %w", err)
	}
	return nil
}

// reap collects every child that has exited, and records the main
// process's end when it is among them.
func reap(mp *mainProc) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if mp != nil && pid == mp.status.PID {
			mp.ended(ws)
		}
	}
}

// Proc is a process as a sweep reports it.
type Proc struct {
	PID int `json:"pid"`
	// PPID is its parent's pid in the container: 0 for a process an exec
	// started (its parent is outside), 1 for one orphaned or daemonized.
	PPID int `json:"ppid"`
	// UID and GID are its real user and group.
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Cmd  string `json:"cmd"`
	Kill bool   `json:"killed,omitempty"` // needed KILL after the grace period
	// Note says what is unusual about the process: a main thread that
	// exited while others run on, a process stuck in the kernel.
	Note string `json:"note,omitempty"`
	// Listens are the TCP and UDP sockets it listens on, as "tcp
	// 0.0.0.0:8080": listed for the processes a sweep kept (Report.Kept).
	Listens []string `json:"listens,omitempty"`
}

// Report says what a sweep did.
type Report struct {
	// Signalled are the processes sent TERM (and KILL where marked), the
	// first maxReported of them.
	Signalled []Proc `json:"signalled"`
	// Unlisted counts the signalled processes past maxReported: an agent
	// may fork thousands.
	Unlisted int `json:"unlisted,omitempty"`
	// Survivors are still alive after KILL: a process stuck in the kernel.
	// Their code cannot run again (KILL is pending), but the verdict of a
	// trial with survivors is not trusted.
	Survivors []Proc `json:"survivors"`
	// Kept are the agents' processes a sweep with Keep left running (they
	// were detached from the agents' execs): they run on during the
	// verifier. The first maxReported of them.
	Kept []Proc `json:"kept,omitempty"`
	// Spared counts the environment's processes the sweep left alone: the
	// image entrypoint's and what it started.
	Spared int `json:"spared,omitempty"`
}

// ErrNotInTrialContainer refuses a sweep outside a trial container: it
// would end every process its user may signal.
var ErrNotInTrialContainer = errors.New("sweep: not in a trial container (PID 1 is not troupe init); refusing to signal every process")

// killTimeout bounds the wait for killed processes to be gone.
const killTimeout = 2 * time.Second

// A report names at most maxReported processes of each list, with at most
// maxCmd characters of each command line.
const (
	maxReported = 100
	maxCmd      = 300
)

// SweepSpec says what a sweep ends. With neither UIDs nor Baseline it
// ends every process of the container but PID 1 and itself.
type SweepSpec struct {
	// Grace is how long processes have to exit after TERM.
	Grace time.Duration `json:"grace"`
	// UIDs are the agents' own uids (agents that run isolated): only
	// their processes are ended, and the environment's (root's, the
	// image's user's) are spared.
	UIDs []int `json:"uids,omitempty"`
	// Baseline, without UIDs, lists the processes there were before the
	// agents started (the environment's: the image's entrypoint and what
	// it started, the tunnel): they are spared, every other is ended.
	Baseline *Baseline `json:"baseline,omitempty"`
	// Keep ends only the processes still attached to an agent's exec
	// (the exec's process and its descendants) and leaves those the
	// agents detached running, listed in Report.Kept. It needs UIDs or a
	// Baseline.
	Keep bool `json:"keep,omitempty"`
}

// Sweep ends the agents' processes in the trial container, as spec says;
// it never ends PID 1 (troupe init) or the sweeping process itself. It
// refuses to run unless PID 1 is troupe init: on a host, kill(-1) would
// end every process the user may signal.
func Sweep(ctx context.Context, spec SweepSpec) (Report, error) {
	if err := checkTrialContainer(); err != nil {
		return Report{}, err
	}
	switch {
	case len(spec.UIDs) > 0:
		return sweepScoped(ctx, spec, uidScope(spec.UIDs))
	case spec.Baseline != nil:
		sc, err := baselineScope(*spec.Baseline)
		if err != nil {
			return Report{}, err
		}
		return sweepScoped(ctx, spec, sc)
	case spec.Keep:
		return Report{}, errors.New("sweep: keep needs the agents' uids or a baseline, to tell the agents' processes from the environment's")
	}
	return sweepAll(ctx, spec.Grace)
}

// sweepAll ends every process of the container but PID 1 (troupe init)
// and the sweeping process itself: TERM to each, up to grace for them to
// exit, then one KILL to every process of the container's PID namespace
// at once, and a wait for every process it reached to be gone. The KILL
// goes out whatever the listing after the grace found, and the wait lists
// the container again: a listing can miss a successor a chain started
// since.
//
// The KILL is kill(-1, SIGKILL): the kernel delivers it to every process
// of the namespace while holding the lock that fork needs, and a fork that
// races it fails, so no process can escape by forking a successor, however
// fast. A thread group whose main thread has exited (it shows as a zombie
// in /proc while its other threads run on) is one process to the kernel
// and is killed with the rest; the listing counts it as live.
func sweepAll(ctx context.Context, grace time.Duration) (Report, error) {
	var rep Report
	self := os.Getpid()
	targets, err := live(self)
	if err != nil {
		return rep, err
	}
	rep.Signalled = terminate(ctx, targets, grace)
	left, err := live(self)
	if err != nil {
		return rep, err
	}
	// The KILL goes out even when nothing is listed: a fork chain lists as
	// nothing when each of its processes that the listing read had forked
	// its successor and exited by the time its entry was read.
	for _, p := range left {
		if i := slices.IndexFunc(rep.Signalled, func(s Proc) bool { return s.PID == p.PID }); i >= 0 {
			rep.Signalled[i].Kill = true
		} else {
			p.Kill = true
			rep.Signalled = append(rep.Signalled, p)
		}
	}
	if err := unix.Kill(-1, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return rep, fmt.Errorf("sweep: kill every process: %w", err)
	}
	rep.Survivors, err = awaitGone(ctx, func() ([]Proc, error) { return live(self) }, killTimeout)
	rep.bound()
	return rep, err
}

// terminate sends TERM to each process and waits up to grace for them to
// exit, on pidfds; it returns those it signalled.
func terminate(ctx context.Context, targets []Proc, grace time.Duration) []Proc {
	var signalled []Proc
	fds := map[int]int{}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, p := range targets {
		fd, err := unix.PidfdOpen(p.PID, 0)
		if err != nil {
			continue // gone already
		}
		fds[p.PID] = fd
		if unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0) == nil {
			signalled = append(signalled, p)
		}
	}
	waitExit(ctx, fds, grace)
	return signalled
}

// awaitGone waits up to timeout for every process that list lists to be
// gone, and returns those that are not. It lists again each round rather
// than waiting on the list taken before the KILL: a process that a chain
// started between that list and the KILL got the KILL too, but is not on
// it, and may still be dying when the KILL returns. Each round opens its
// own pidfds, so a PID reused since an earlier list is waited for as the
// process it now is.
func awaitGone(ctx context.Context, list func() ([]Proc, error), timeout time.Duration) ([]Proc, error) {
	deadline := time.Now().Add(timeout)
	for {
		left, err := list()
		if err != nil || len(left) == 0 || ctx.Err() != nil || time.Until(deadline) <= 0 {
			return left, err
		}
		fds := make(map[int]int, len(left))
		for _, p := range left {
			if fd, err := unix.PidfdOpen(p.PID, 0); err == nil {
				fds[p.PID] = fd
			}
		}
		waitExit(ctx, fds, time.Until(deadline))
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}

// bound keeps the report small however many processes there were.
func (rep *Report) bound() {
	if n := len(rep.Signalled); n > maxReported {
		rep.Unlisted, rep.Signalled = n-maxReported, rep.Signalled[:maxReported]
	}
	if len(rep.Survivors) > maxReported {
		rep.Survivors = rep.Survivors[:maxReported]
	}
	if len(rep.Kept) > maxReported {
		rep.Kept = rep.Kept[:maxReported]
	}
}

// checkTrialContainer makes sure the sweep runs where kill(-1) reaches the
// trial's processes only: in a PID namespace whose PID 1 is troupe init.
func checkTrialContainer() error {
	if os.Getpid() == 1 {
		return ErrNotInTrialContainer
	}
	p, _, ok := readProc(1)
	if !ok || !IsTroupe(p, "init") {
		return ErrNotInTrialContainer
	}
	return nil
}

// waitExit waits until every pidfd is readable (its process exited) or the
// timeout passes.
func waitExit(ctx context.Context, fds map[int]int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	pending := maps.Clone(fds)
	for len(pending) > 0 && ctx.Err() == nil {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		poll := make([]unix.PollFd, 0, len(pending))
		pids := make([]int, 0, len(pending))
		for pid, fd := range pending {
			poll = append(poll, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			pids = append(pids, pid)
		}
		n, err := unix.Poll(poll, int(min(left, 100*time.Millisecond).Milliseconds())+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n <= 0 {
			continue // the 100 ms slice lets ctx end a long grace
		}
		for i, pfd := range poll {
			if pfd.Revents != 0 {
				delete(pending, pids[i])
			}
		}
	}
}

// live lists the processes of the container that can still run code, but
// PID 1 and self. A process whose /proc entry is a zombie is live while any
// of its threads is not: its main thread exited, the others run on.
func live(self int) ([]Proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("sweep: list processes: %w", err)
	}
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 || pid == self {
			continue
		}
		p, state, ok := readProc(pid)
		if !ok {
			continue
		}
		switch state {
		case 'Z', 'X':
			running := runningThreads(pid)
			if running == 0 {
				continue // exited; init reaps it
			}
			p.Note = fmt.Sprintf("main thread exited; %d threads still running", running)
		case 'D':
			p.Note = "in uninterruptible sleep (stuck in the kernel)"
		}
		out = append(out, p)
	}
	return out, nil
}

// runningThreads counts a process's threads that have not exited.
func runningThreads(pid int) int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	n := 0
	for _, t := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue
		}
		if state, ok := statState(stat); ok && state != 'Z' && state != 'X' {
			n++
		}
	}
	return n
}

// statState reads the state field of a /proc stat line: the field after the
// command, which is in parentheses and may itself hold ") ".
func statState(stat []byte) (byte, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0, false
	}
	return stat[i+2], true
}

func readProc(pid int) (Proc, byte, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}, 0, false
	}
	state, ok := statState(stat)
	if !ok {
		return Proc{}, 0, false
	}
	p := Proc{PID: pid}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		p.Cmd = clip.Head(strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")), maxCmd)
	}
	if p.Cmd == "" {
		open := bytes.IndexByte(stat, '(')
		p.Cmd = "[" + string(stat[open+1:bytes.LastIndexByte(stat, ')')]) + "]"
	}
	p.PPID = statPPID(stat)
	// Real ids from status: /proc/PID itself is root's when the process
	// made itself non-dumpable.
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		p.UID, p.GID = statusID(status, "Uid:"), statusID(status, "Gid:")
	}
	return p, state, true
}

// statPPID reads the parent pid of a /proc stat line: the field after the
// state.
func statPPID(stat []byte) int {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// statusID reads the first (real) id of a /proc status line such as
// "Uid:\t1000\t1000\t1000\t1000"; -1 when there is none.
func statusID(status []byte, key string) int {
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, key); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// IsTroupe reports whether a process runs troupe's own binary with the given
// subcommand (a sweep checks that PID 1 is troupe init this way).
func IsTroupe(p Proc, sub string) bool {
	fields := strings.Fields(p.Cmd)
	return len(fields) >= 2 && filepath.Base(fields[0]) == "troupe" && fields[1] == sub
}
