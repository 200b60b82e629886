//go:build linux

// Package inside is troupe's code that runs inside a trial container, as
// subcommands of the same static binary: Init is PID 1 (it reaps orphaned
// processes and idles until told to stop), Sweep ends every agent process at
// the end of a trial (TERM, a grace period, then KILL) and reports what
// survived. The tunnel's container end is in runtime/tunnel.
package inside

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Init runs as the container's PID 1 until ctx ends (the caller cancels it
// on SIGTERM): agents' orphaned children are reparented to it, and it reaps
// them so they never pile up as zombies.
func Init(ctx context.Context) error {
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	reap()
	for {
		select {
		case <-ctx.Done():
			reap()
			return nil
		case <-chld:
			reap()
		}
	}
}

// reap collects every child that has exited.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// Proc is a process as a sweep reports it.
type Proc struct {
	PID  int    `json:"pid"`
	UID  int    `json:"uid"`
	Cmd  string `json:"cmd"`
	Kill bool   `json:"killed,omitempty"` // needed KILL after the grace period
}

// Report says what a sweep did.
type Report struct {
	// Signalled are the processes sent TERM.
	Signalled []Proc `json:"signalled"`
	// Survivors are still alive after KILL: a process stuck in the kernel.
	Survivors []Proc `json:"survivors"`
}

// Sweep ends every process of the container except PID 1, itself and those
// keep spares: TERM, then up to grace for them to exit, then KILL for the
// rest, and again for any process started meanwhile. It waits on pidfds, not
// by polling, where the kernel has them.
func Sweep(ctx context.Context, grace time.Duration, keep func(Proc) bool) (Report, error) {
	var rep Report
	self := os.Getpid()
	spare := func(p Proc) bool { return p.PID == 1 || p.PID == self || keep != nil && keep(p) }
	targets, err := victims(spare)
	if err != nil {
		return rep, err
	}
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
			rep.Signalled = append(rep.Signalled, p)
		}
	}
	waitExit(ctx, fds, grace)
	// Whatever is left, and whatever was started meanwhile, gets KILL, until
	// nothing is left or three rounds have passed.
	for round := 0; round < 3; round++ {
		left, err := victims(spare)
		if err != nil {
			return rep, err
		}
		if len(left) == 0 {
			return rep, nil
		}
		killFDs := map[int]int{}
		for _, p := range left {
			fd, ok := fds[p.PID]
			if !ok {
				if fd, err = unix.PidfdOpen(p.PID, 0); err != nil {
					continue
				}
				fds[p.PID] = fd
			}
			killFDs[p.PID] = fd
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			if i := slices.IndexFunc(rep.Signalled, func(s Proc) bool { return s.PID == p.PID }); i >= 0 {
				rep.Signalled[i].Kill = true
			} else {
				p.Kill = true
				rep.Signalled = append(rep.Signalled, p)
			}
		}
		waitExit(ctx, killFDs, time.Second)
	}
	rep.Survivors, err = victims(spare)
	return rep, err
}

// waitExit waits until every pidfd is readable (its process exited) or the
// timeout passes.
func waitExit(ctx context.Context, fds map[int]int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	pending := map[int]int{}
	for pid, fd := range fds {
		pending[pid] = fd
	}
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

// victims lists the live processes a sweep would end. Zombies have exited
// already and are left for Init to reap.
func victims(spare func(Proc) bool) ([]Proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("sweep: list processes: %w", err)
	}
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, state, ok := readProc(pid)
		if !ok || state == 'Z' || spare(p) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

func readProc(pid int) (Proc, byte, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}, 0, false
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 >= len(stat) {
		return Proc{}, 0, false
	}
	state := stat[i+2]
	p := Proc{PID: pid}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		p.Cmd = strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	if p.Cmd == "" {
		open := strings.IndexByte(string(stat), '(')
		p.Cmd = "[" + string(stat[open+1:i]) + "]"
	}
	if info, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			p.UID = int(st.Uid)
		}
	}
	return p, state, true
}

// IsTroupe reports whether a process runs troupe's own binary with the given
// subcommand (the tunnel is spared by a sweep this way).
func IsTroupe(p Proc, sub string) bool {
	fields := strings.Fields(p.Cmd)
	return len(fields) >= 2 && filepath.Base(fields[0]) == "troupe" && fields[1] == sub
}
