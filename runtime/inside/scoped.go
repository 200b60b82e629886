//go:build linux

package inside

import (
	"context"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A scoped sweep ends the agents' processes and spares the environment's:
// what the image's entrypoint started (a daemon its verifier counts on)
// runs on, as under Harbor, which stops nothing between the agents and
// the verifier. Which processes are the agents' is told one of two ways:
//
//   - by uid, when every agent runs as its own uid (agent_user: isolated).
//     An agent cannot take another uid: the container's processes cannot
//     gain privileges (no-new-privileges: setuid and setgid files and file
//     capabilities do nothing), and a non-root uid has no capability to
//     change its ids. Each uid's processes are killed at once by a
//     kill(-1) sent with that uid's credentials alone (asCred), which the
//     kernel delivers to every process the sender may signal — that uid's,
//     none of root's — while forks are locked out, as in sweepAll.
//   - by a baseline, when the agents run as root or as the image's user
//     and their uid tells nothing: the processes there were before the
//     agents started (by pid and start time), and every descendant of the
//     image's entrypoint (a subreaper, so what it daemonizes stays its
//     descendant) whenever it started, are the environment's; every other
//     is ended. All processes are stopped at once (kill(-1, SIGSTOP): no
//     fork escapes it), the others killed one by one while nothing can
//     fork, and all continued. This is weaker: an agent running as root
//     can reach into an environment's process (ptrace it, where the
//     kernel's Yama policy allows) or make it run its code, which no sweep
//     can tell from the environment's.

// scope is the part of the container a sweep ends.
type scope struct {
	// target reports whether a listed process is the agents'.
	target func(Proc) bool
	// signal sends sig to every target at once, atomically against forks;
	// it may reach other processes too (STOP and CONT only).
	signal func(sig unix.Signal) error
	// killAll KILLs every target at once; nil when it cannot without
	// reaching the environment (then: stop all, KILL each, continue all).
	killAll func() error
}

// uidScope: the agents are the processes of uids.
func uidScope(uids []int) scope {
	set := map[int]bool{}
	for _, u := range uids {
		set[u] = true
	}
	each := func(sig unix.Signal) error {
		var errs []error
		for _, uid := range uids {
			if uid <= 0 {
				errs = append(errs, fmt.Errorf("sweep: uid %d is not an agent's: refusing to signal as it", uid))
				continue
			}
			errs = append(errs, asCred(uid, uid, func() error {
				if err := unix.Kill(-1, sig); err != nil && !errors.Is(err, unix.ESRCH) {
					return fmt.Errorf("sweep: signal %s to uid %d's processes: %w", sig, uid, err)
				}
				return nil
			}))
		}
		return errors.Join(errs...)
	}
	return scope{
		target:  func(p Proc) bool { return set[p.UID] },
		signal:  each,
		killAll: func() error { return each(unix.SIGKILL) },
	}
}

// baselineScope: the agents are the processes not in base.
func baselineScope(base Baseline) (scope, error) {
	if len(base.Procs) == 0 {
		return scope{}, errors.New("sweep: an empty baseline: the environment's processes are unknown")
	}
	keep := make(map[ProcKey]bool, len(base.Procs))
	for _, k := range base.Procs {
		keep[k] = true
	}
	return scope{
		target: func(p Proc) bool {
			k, ok := procKey(p.PID)
			return ok && !keep[k] && (base.Main == nil || !descends(p.PID, *base.Main))
		},
		signal: func(sig unix.Signal) error {
			if err := unix.Kill(-1, sig); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("sweep: signal %s to every process: %w", sig, err)
			}
			return nil
		},
	}, nil
}

// ListTrial lists the trial container's processes but PID 1 and the
// calling one, before the agents start: the baseline a sweep spares.
func ListTrial() (Baseline, error) {
	if err := checkTrialContainer(); err != nil {
		return Baseline{}, err
	}
	b, err := listBaseline()
	if err != nil {
		return b, err
	}
	// Read now, before the agents run: they could not yet have changed it.
	if st, err := ReadMainStatus(); err == nil && st != nil && st.PID > 0 && !st.Exited {
		if k, ok := procKey(st.PID); ok && slices.Contains(b.Procs, k) {
			b.Main = &k
		}
	}
	return b, nil
}

// descends reports whether the process pid descends from main (is main,
// or has it among its parents), reading the parents from /proc.
func descends(pid int, main ProcKey) bool {
	for range 4096 {
		if pid == main.PID {
			k, ok := procKey(pid)
			return ok && k == main
		}
		if pid <= 1 {
			return false
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		pid = statPPID(stat)
	}
	return false
}

// sweepScoped ends the scope's processes (with spec.Keep, those attached
// to an agent's exec): TERM to each, up to the grace period, then KILL to
// all at once (killAll), or, where the scope cannot, stop all, KILL each
// listed again until none is new, continue all; then it waits for them to
// be gone. It reports the environment's processes it spared and, with
// Keep, the agents' it left running, with what they listen on.
func sweepScoped(ctx context.Context, spec SweepSpec, sc scope) (Report, error) {
	var rep Report
	self := os.Getpid()
	// With Keep, what was attached at the first listing stays so: a
	// process whose parent TERM ended is not detached by that.
	var marked map[ProcKey]bool
	ends := func() ([]Proc, error) {
		all, err := live(self)
		if err != nil {
			return nil, err
		}
		ts := slices.DeleteFunc(all, func(p Proc) bool { return !sc.target(p) })
		if spec.Keep {
			ts = attached(ts, marked)
		}
		return ts, nil
	}
	targets, err := ends()
	if err != nil {
		return rep, err
	}
	if spec.Keep {
		marked = map[ProcKey]bool{}
		for _, p := range targets {
			if k, ok := procKey(p.PID); ok {
				marked[k] = true
			}
		}
	}
	rep.Signalled = terminate(ctx, targets, spec.Grace)
	if !spec.Keep && sc.killAll != nil {
		left, err := ends()
		if err != nil {
			return rep, err
		}
		for _, p := range left {
			markKilled(&rep, p)
		}
		// As in sweepAll, the KILL goes out even when nothing is listed.
		if err := sc.killAll(); err != nil {
			return rep, err
		}
	} else {
		// Stop, kill, continue: the CONT is sent whatever happens.
		if err := sc.signal(unix.SIGSTOP); err != nil {
			sc.signal(unix.SIGCONT)
			return rep, err
		}
		killErr := killNewcomers(ctx, &rep, ends)
		if err := sc.signal(unix.SIGCONT); err != nil {
			killErr = errors.Join(killErr, err)
		}
		if killErr != nil {
			rep.bound()
			return rep, killErr
		}
	}
	rep.Survivors, err = awaitGone(ctx, ends, killTimeout)
	if err == nil {
		var all []Proc
		if all, err = live(self); err == nil {
			for _, p := range all {
				switch {
				case !sc.target(p):
					rep.Spared++
				case spec.Keep && !slices.ContainsFunc(rep.Survivors, func(s Proc) bool { return s.PID == p.PID }):
					rep.Kept = append(rep.Kept, p)
				}
			}
			addListens(rep.Kept)
		}
	}
	rep.bound()
	return rep, err
}

// markKilled marks p as needing KILL in the report, adding it when TERM
// did not reach it.
func markKilled(rep *Report, p Proc) {
	if i := indexPID(rep.Signalled, p.PID); i >= 0 {
		rep.Signalled[i].Kill = true
		return
	}
	p.Kill = true
	rep.Signalled = append(rep.Signalled, p)
}

// attached keeps the processes that are an agent exec's own (its parent
// is outside the container: PPID 0), were marked attached before, or
// descend from one of these through processes of ps. One whose line of
// parents reaches a process not in ps (PID 1, which takes in orphans and
// daemons, or an environment's process) was detached.
func attached(ps []Proc, marked map[ProcKey]bool) []Proc {
	byPID := make(map[int]Proc, len(ps))
	for _, p := range ps {
		byPID[p.PID] = p
	}
	root := func(p Proc) bool {
		if p.PPID == 0 {
			return true
		}
		k, ok := procKey(p.PID)
		return ok && marked[k]
	}
	var out []Proc
	for _, p := range ps {
		cur, ok := p, true
		// A chain longer than ps has a loop (a pid reused while listing).
		for range len(ps) + 1 {
			if root(cur) {
				break
			}
			if cur, ok = byPID[cur.PPID]; !ok {
				break
			}
		}
		if ok && root(cur) {
			out = append(out, p)
		}
	}
	return out
}

// asCred runs fn on an OS thread of its own that first takes uid and gid
// as its only ids (setresgid, setresuid: the raw calls change that thread
// alone, where Go's change every thread). The thread can no longer be
// root, so it is never given back: the goroutine ends locked to it, and Go
// ends the thread with it (and never starts a thread from a locked one).
func asCred(uid, gid int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			errc <- fmt.Errorf("take gid %d: %w", gid, e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			errc <- fmt.Errorf("take uid %d: %w", uid, e)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// addListens fills in what each process listens on: its sockets (the
// links of /proc/PID/fd, read with the process's own ids, as root has no
// CAP_SYS_PTRACE to read another user's) found among the container's
// listening sockets (/proc/net).
func addListens(ps []Proc) {
	if len(ps) == 0 {
		return
	}
	socks := listeners()
	for i := range ps {
		var inodes []uint64
		read := func() error {
			inodes = socketInodes(ps[i].PID)
			return nil
		}
		if ps[i].UID >= 0 && ps[i].GID >= 0 {
			asCred(ps[i].UID, ps[i].GID, read)
		} else {
			read()
		}
		for _, ino := range inodes {
			if s, ok := socks[ino]; ok && !slices.Contains(ps[i].Listens, s) {
				ps[i].Listens = append(ps[i].Listens, s)
			}
		}
		slices.Sort(ps[i].Listens)
	}
}

// socketInodes lists the inodes of a process's open sockets.
func socketInodes(pid int) []uint64 {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []uint64
	for _, e := range entries {
		link, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		if rest, ok := strings.CutPrefix(link, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// listeners maps the inodes of the container's listening sockets (TCP in
// LISTEN, UDP bound and unconnected) to what they listen on.
func listeners() map[uint64]string {
	out := map[uint64]string{}
	for _, f := range []struct{ file, proto string }{
		{"/proc/net/tcp", "tcp"}, {"/proc/net/tcp6", "tcp"}, {"/proc/net/udp", "udp"}, {"/proc/net/udp6", "udp"},
	} {
		data, err := os.ReadFile(f.file)
		if err != nil {
			continue
		}
		for ino, addr := range parseNetSockets(data, f.proto) {
			out[ino] = addr
		}
	}
	return out
}
