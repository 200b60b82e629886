package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Owner identifies the troupe process that created a resource: its host,
// the host's boot, its process id and the process's start time. A later
// process on the same host tells from these whether the owner still runs: a
// reused pid has another start time, and after a reboot the boot differs.
type Owner struct {
	Host  string
	Boot  string // the first 8 characters of the kernel's boot id
	PID   int
	Start uint64 // the process's start time in clock ticks since boot
}

// String is the owner as written in the troupe.owner label:
// host:boot:pid:start.
func (o Owner) String() string {
	return fmt.Sprintf("%s:%s:%d:%d", o.Host, o.Boot, o.PID, o.Start)
}

// ParseOwner reads a troupe.owner label.
func ParseOwner(s string) (Owner, error) {
	i := strings.LastIndexByte(s, ':')
	j := strings.LastIndexByte(s[:max(i, 0)], ':')
	k := strings.LastIndexByte(s[:max(j, 0)], ':')
	if i < 0 || j < 0 || k < 0 {
		return Owner{}, fmt.Errorf("owner label %q is not host:boot:pid:start", s)
	}
	pid, err1 := strconv.Atoi(s[j+1 : i])
	start, err2 := strconv.ParseUint(s[i+1:], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return Owner{}, fmt.Errorf("owner label %q is not host:boot:pid:start", s)
	}
	return Owner{Host: s[:k], Boot: s[k+1 : j], PID: pid, Start: start}, nil
}

var (
	selfOnce  sync.Once
	selfOwner Owner
	selfErr   error
)

// Self is the owner that stands for this process.
func Self() (Owner, error) {
	selfOnce.Do(func() {
		host, err := os.Hostname()
		if err != nil {
			selfErr = fmt.Errorf("hostname: %w", err)
			return
		}
		boot, err := bootID()
		if err != nil {
			selfErr = err
			return
		}
		start, err := processStart(os.Getpid())
		if err != nil {
			selfErr = err
			return
		}
		selfOwner = Owner{Host: host, Boot: boot, PID: os.Getpid(), Start: start}
	})
	return selfOwner, selfErr
}

func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	return id[:min(8, len(id))], nil
}

// processStart reads a process's start time (field 22 of /proc/pid/stat).
// A missing process is fs.ErrNotExist.
func processStart(pid int) (uint64, error) {
	p, err := readProc(pid)
	return p.start, err
}

// proc is what the owner check reads of a process in /proc.
type proc struct {
	start uint64 // clock ticks since boot (stat field 22)
	state byte   // R, S, D, Z, X… (stat field 3)
	flags uint64 // the kernel's PF_* flags (stat field 9)
	// killed: SIGKILL is pending, for the thread group or its leader
	// (SigPnd, ShdPnd in /proc/pid/status).
	killed bool
}

// pfExiting is the kernel's PF_EXITING: the process is in exit().
const pfExiting = 0x4

// gone says the process will create nothing more: it is a zombie or dead,
// in exit(), or SIGKILL waits for it. A troupe killed on a loaded machine
// stays in these states for seconds (its parent has not waited for it yet,
// its threads have not all run to their end); its pid and start time still
// match, and without this its containers counted as a live owner's.
func (p proc) gone() bool {
	return p.state == 'Z' || p.state == 'X' || p.state == 'x' || p.flags&pfExiting != 0 || p.killed
}

// readProc reads /proc/pid/stat and /proc/pid/status. A missing process is
// fs.ErrNotExist.
func readProc(pid int) (proc, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, err
	}
	// A process reaped between the two reads is gone: fs.ErrNotExist too.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return proc{}, err
	}
	return parseProc(pid, stat, status)
}

// sigkillBit is SIGKILL's bit in /proc/pid/status's signal masks.
const sigkillBit = 1 << (9 - 1)

// parseProc reads a process's /proc/pid/stat and /proc/pid/status (which
// may be empty: then no signal counts as pending).
func parseProc(pid int, stat, status []byte) (proc, error) {
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || !strings.Contains(s[:i], "(") {
		return proc{}, fmt.Errorf("/proc/%d/stat has no command name", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return proc{}, fmt.Errorf("/proc/%d/stat is too short", pid)
	}
	var p proc
	var err error
	// The state is one letter (R, S, D, Z, T, t, X, I…).
	if c := fields[0]; len(c) != 1 || !('A' <= c[0] && c[0] <= 'Z' || 'a' <= c[0] && c[0] <= 'z') {
		return proc{}, fmt.Errorf("/proc/%d/stat: state %q", pid, fields[0])
	}
	p.state = fields[0][0]
	if p.flags, err = strconv.ParseUint(fields[6], 10, 64); err != nil {
		return proc{}, fmt.Errorf("/proc/%d/stat: flags: %w", pid, err)
	}
	if p.start, err = strconv.ParseUint(fields[19], 10, 64); err != nil {
		return proc{}, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	for line := range strings.Lines(string(status)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "SigPnd" && name != "ShdPnd") {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64)
		if err != nil {
			return proc{}, fmt.Errorf("/proc/%d/status: %s: %w", pid, name, err)
		}
		p.killed = p.killed || mask&sigkillBit != 0
	}
	return p, nil
}

// Alive reports whether the owner still runs, as seen from self: only an
// owner on the same host and boot can be checked; any other is assumed
// alive. A process that is ending (a zombie, in exit, SIGKILL pending)
// is not alive: it creates nothing more.
func (o Owner) Alive(self Owner) bool {
	if o.Host != self.Host || o.Boot != self.Boot {
		return true
	}
	p, err := readProc(o.PID)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	return p.start == o.Start && !p.gone()
}

// Cleaner is what Reap needs from a backend: troupe's resources listed by
// label, and one removed.
type Cleaner interface {
	List(ctx context.Context, labels map[string]string) ([]Resource, error)
	Remove(ctx context.Context, r Resource) error
}

// ReapOptions choose what Reap removes.
type ReapOptions struct {
	// All removes every troupe resource, whoever owns it and whether or not
	// the owner runs.
	All bool
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
}

// reapPasses bounds Reap's passes: each one after the first removes only
// what the previous listing did not show.
const reapPasses = 5

// Reap removes the troupe resources whose owner process is gone (on this
// host and boot): containers first, then networks. It returns what it
// removed (or would remove) and every error it met, joined; one failure does
// not stop the rest.
//
// A killed troupe's last requests may still be in the engine: a container
// it asked for appears after the listing, and the network it joins then
// refuses to go. So Reap lists again after removing, and removes what is
// new (retrying what failed) until a listing shows nothing new, at most
// reapPasses times; what it removed in the end is not an error.
func Reap(ctx context.Context, rt Cleaner, self Owner, opts ReapOptions) ([]Resource, error) {
	seen := map[string]bool{}
	failed := map[string]error{}
	var removed []Resource
	for pass := 0; pass < reapPasses; pass++ {
		doomed, err := reapable(ctx, rt, self, opts)
		if err != nil {
			return removed, errors.Join(append(joinedErrors(failed), err)...)
		}
		if opts.DryRun {
			return doomed, nil
		}
		var todo []Resource
		fresh := false
		for _, r := range doomed {
			key := r.Kind + " " + r.ID
			if !seen[key] {
				fresh = true
				todo = append(todo, r)
			} else if failed[key] != nil {
				todo = append(todo, r)
			}
		}
		if !fresh {
			break
		}
		for _, r := range todo {
			key := r.Kind + " " + r.ID
			seen[key] = true
			if err := rt.Remove(ctx, r); err != nil {
				failed[key] = fmt.Errorf("remove %s: %w", r, err)
				continue
			}
			delete(failed, key)
			removed = append(removed, r)
		}
	}
	return removed, errors.Join(joinedErrors(failed)...)
}

// reapable lists the resources Reap removes, containers before the
// networks they are attached to.
func reapable(ctx context.Context, rt Cleaner, self Owner, opts ReapOptions) ([]Resource, error) {
	all, err := rt.List(ctx, map[string]string{LabelOwner: ""})
	if err != nil {
		return nil, fmt.Errorf("list troupe resources: %w", err)
	}
	var doomed []Resource
	for _, r := range all {
		if opts.All {
			doomed = append(doomed, r)
			continue
		}
		o, err := ParseOwner(r.Labels[LabelOwner])
		if err != nil {
			continue // not ours to judge
		}
		if o != self && !o.Alive(self) {
			doomed = append(doomed, r)
		}
	}
	slices.SortStableFunc(doomed, func(a, b Resource) int {
		return kindOrder(a.Kind) - kindOrder(b.Kind)
	})
	return doomed, nil
}

// joinedErrors are the failures in a stable order, for one message.
func joinedErrors(failed map[string]error) []error {
	keys := slices.Sorted(maps.Keys(failed))
	errs := make([]error, 0, len(keys))
	for _, k := range keys {
		errs = append(errs, failed[k])
	}
	return errs
}

func kindOrder(kind string) int {
	if kind == KindContainer {
		return 0
	}
	return 1
}
