package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestOwner(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if self.PID != os.Getpid() || self.Start == 0 || self.Boot == "" {
		t.Fatalf("self %+v", self)
	}
	back, err := ParseOwner(self.String())
	if err != nil || back != self {
		t.Fatalf("round trip %q: %+v %v", self.String(), back, err)
	}
	if !self.Alive(self) {
		t.Error("this process is not alive?")
	}
	// A finished process is dead; the same pid with another start time too.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := Owner{Host: self.Host, Boot: self.Boot, PID: cmd.Process.Pid, Start: 1}
	if dead.Alive(self) {
		t.Error("a finished process is alive")
	}
	reused := Owner{Host: self.Host, Boot: self.Boot, PID: os.Getpid(), Start: self.Start + 1}
	if reused.Alive(self) {
		t.Error("a reused pid with another start time counts as the owner")
	}
	elsewhere := Owner{Host: "other-host", Boot: self.Boot, PID: cmd.Process.Pid, Start: 1}
	otherBoot := Owner{Host: self.Host, Boot: "00000000", PID: cmd.Process.Pid, Start: 1}
	if !elsewhere.Alive(self) || !otherBoot.Alive(self) {
		t.Error("an owner that cannot be checked must be assumed alive")
	}
	for _, bad := range []string{"", "host", "h:b:x:1", "h:b:0:1", "h:b:1:-2"} {
		if _, err := ParseOwner(bad); err == nil {
			t.Errorf("ParseOwner(%q) accepted", bad)
		}
	}
	if o, err := ParseOwner("host:with:colons:abc:12:34"); err != nil || o.Host != "host:with:colons" || o.PID != 12 {
		t.Errorf("a host name with colons: %+v %v", o, err)
	}
}

// TestOwnerAliveStates: the owner check on real processes in each state a
// killed troupe passes through. A zombie (killed, not yet waited for by its
// parent, which a loaded machine may not get to for seconds) creates
// nothing more: its resources are the next run's to remove.
func TestOwnerAliveStates(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	started := func(t *testing.T, name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		return cmd
	}
	ownerOf := func(t *testing.T, pid int) Owner {
		start, err := processStart(pid)
		if err != nil {
			t.Fatal(err)
		}
		return Owner{Host: self.Host, Boot: self.Boot, PID: pid, Start: start}
	}
	for _, tc := range []struct {
		name  string
		owner func(t *testing.T) Owner
		alive bool
	}{
		{"live", func(t *testing.T) Owner { return ownerOf(t, started(t, "sleep", "30").Process.Pid) }, true},
		{"zombie", func(t *testing.T) Owner {
			cmd := started(t, "true")
			o := ownerOf(t, cmd.Process.Pid)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", o.PID)); err == nil && strings.HasPrefix(string(b[strings.LastIndexByte(string(b), ')')+1:]), " Z ") {
					return o
				}
				if time.Now().After(deadline) {
					t.Fatal("the child did not become a zombie")
				}
			}
		}, false},
		{"killed, not waited for", func(t *testing.T) Owner {
			cmd := started(t, "sleep", "30")
			o := ownerOf(t, cmd.Process.Pid)
			cmd.Process.Signal(syscall.SIGKILL)
			return o
		}, false},
		{"dead", func(t *testing.T) Owner {
			cmd := exec.Command("true")
			if err := cmd.Run(); err != nil {
				t.Fatal(err)
			}
			return Owner{Host: self.Host, Boot: self.Boot, PID: cmd.Process.Pid, Start: 1}
		}, false},
		{"reused pid", func(t *testing.T) Owner {
			o := ownerOf(t, started(t, "sleep", "30").Process.Pid)
			o.Start++
			return o
		}, false},
		{"self", func(*testing.T) Owner { return self }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.owner(t).Alive(self); got != tc.alive {
				t.Errorf("Alive = %v, want %v", got, tc.alive)
			}
		})
	}
}

// TestReadProc reads /proc/PID/stat and status as the kernel writes them:
// a command name with spaces and parentheses, each state of an ending
// process, a pending SIGKILL.
func TestReadProc(t *testing.T) {
	stat := func(comm, state string, flags uint64) string {
		return fmt.Sprintf("4242 (%s) %s 1 4242 4242 0 -1 %d 100 0 0 0 5 3 0 0 20 0 12 0 987654 123456789 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n", comm, state, flags)
	}
	status := func(sigpnd, shdpnd string) string {
		return "Name:\ttroupe\nState:\tS (sleeping)\nSigQ:\t0/31063\nSigPnd:\t" + sigpnd + "\nShdPnd:\t" + shdpnd + "\nSigBlk:\t0000000000000000\n"
	}
	for _, tc := range []struct {
		name, stat, status string
		start              uint64
		gone               bool
		err                string
	}{
		{"sleeping", stat("troupe", "S", 0x400000), status("0000000000000000", "0000000000000000"), 987654, false, ""},
		{"odd name", stat("a) R (b", "R", 0), status("0000000000000000", "0000000000000000"), 987654, false, ""},
		{"zombie", stat("troupe", "Z", 0x400000), "", 987654, true, ""},
		{"dead", stat("troupe", "X", 0), "", 987654, true, ""},
		{"exiting", stat("troupe", "D", 0x400004), status("0000000000000000", "0000000000000000"), 987654, true, ""},
		{"SIGKILL pending", stat("troupe", "D", 0x400000), status("0000000000000100", "0000000000000000"), 987654, true, ""},
		{"SIGKILL pending for the group", stat("troupe", "R", 0x400000), status("0000000000000000", "0000000000000100"), 987654, true, ""},
		{"SIGTERM pending", stat("troupe", "S", 0x400000), status("0000000000004000", "0000000000004000"), 987654, false, ""},
		{"short", "4242 (troupe) S 1 2 3\n", "", 0, false, "too short"},
		{"no name", "4242 troupe S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21\n", "", 0, false, "no command name"},
		{"bad start", strings.Replace(stat("troupe", "S", 0), " 987654 ", " -5 ", 1), "", 0, false, "start time"},
		{"bad status", stat("troupe", "S", 0), "SigPnd:\tzz\n", 0, false, "SigPnd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseProc(4242, []byte(tc.stat), []byte(tc.status))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || p.start != tc.start || p.gone() != tc.gone {
				t.Errorf("%+v gone=%v %v; want start %d gone=%v", p, p.gone(), err, tc.start, tc.gone)
			}
		})
	}
}

func FuzzParseProc(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 12 100 10 0\n"), []byte("SigPnd:\t0000000000000100\nShdPnd:\t0\n"))
	f.Add([]byte("2 ((()) Z"), []byte(""))
	f.Fuzz(func(t *testing.T, stat, status []byte) {
		p, err := parseProc(1, stat, status)
		if err == nil && p.state == 0 {
			t.Errorf("no state from %q", stat)
		}
	})
}

// fakeCleaner stands in for a backend: Reap's choices are logic.
type fakeCleaner struct {
	resources []Resource
	removed   []string
	fail      string
}

func (f *fakeCleaner) List(context.Context, map[string]string) ([]Resource, error) {
	return f.resources, nil
}

func (f *fakeCleaner) Remove(_ context.Context, r Resource) error {
	if r.ID == f.fail {
		return errors.New("engine said no")
	}
	f.removed = append(f.removed, r.ID)
	return nil
}

func TestReap(t *testing.T) {
	self, _ := Self()
	dead := Owner{Host: self.Host, Boot: self.Boot, PID: 999999, Start: 1}
	remote := Owner{Host: "elsewhere", Boot: "x", PID: 1, Start: 1}
	res := func(kind, id string, o Owner) Resource {
		return Resource{Kind: kind, ID: id, Labels: map[string]string{LabelOwner: o.String()}}
	}
	f := &fakeCleaner{resources: []Resource{
		res("network", "dead-net", dead),
		res(KindContainer, "dead-ctr", dead),
		res(KindContainer, "mine", self),
		res(KindContainer, "remote", remote),
		{Kind: KindContainer, ID: "garbled", Labels: map[string]string{LabelOwner: "??"}},
	}}
	dry, err := Reap(context.Background(), f, self, ReapOptions{DryRun: true})
	if err != nil || len(dry) != 2 || len(f.removed) != 0 {
		t.Fatalf("dry run: %v %v, removed %v", dry, err, f.removed)
	}
	removed, err := Reap(context.Background(), f, self, ReapOptions{})
	if err != nil || !slices.Equal(f.removed, []string{"dead-ctr", "dead-net"}) || len(removed) != 2 {
		t.Errorf("reaped %v (containers before networks) %v", f.removed, err)
	}
	f.removed, f.fail = nil, "dead-ctr"
	removed, err = Reap(context.Background(), f, self, ReapOptions{})
	if err == nil || !strings.Contains(err.Error(), "engine said no") || !slices.Equal(f.removed, []string{"dead-net"}) || len(removed) != 1 {
		t.Errorf("one failure must not stop the rest: %v %v", f.removed, err)
	}
	f.removed, f.fail = nil, ""
	if _, err := Reap(context.Background(), f, self, ReapOptions{All: true}); err != nil || len(f.removed) != 5 {
		t.Errorf("--all removed %v", f.removed)
	}
}

// engineCleaner is an engine as Reap meets it after a kill: the dead
// owner's last create lands just after the first listing, attached to its
// network, which refuses to go while it is there.
type engineCleaner struct {
	resources []Resource
	late      *Resource // appears once the first listing is done
	lists     int
}

func (e *engineCleaner) List(context.Context, map[string]string) ([]Resource, error) {
	e.lists++
	out := slices.Clone(e.resources)
	if e.late != nil {
		e.resources, e.late = append(e.resources, *e.late), nil
	}
	return out, nil
}

func (e *engineCleaner) Remove(_ context.Context, r Resource) error {
	if r.Kind != KindContainer && slices.ContainsFunc(e.resources, func(c Resource) bool { return c.Kind == KindContainer }) {
		return errors.New("network has active endpoints")
	}
	e.resources = slices.DeleteFunc(e.resources, func(c Resource) bool { return c.ID == r.ID })
	return nil
}

// TestReapLateArrivals: what a killed troupe asked for lands after the
// reaper's listing; the reaper removes it and the network it kept, and
// reports no error for what it removed in the end.
func TestReapLateArrivals(t *testing.T) {
	self, _ := Self()
	dead := Owner{Host: self.Host, Boot: self.Boot, PID: 999999, Start: 1}.String()
	e := &engineCleaner{
		resources: []Resource{
			{Kind: "network", ID: "net", Name: "net", Labels: map[string]string{LabelOwner: dead}},
			{Kind: KindContainer, ID: "first", Labels: map[string]string{LabelOwner: dead}},
		},
		late: &Resource{Kind: KindContainer, ID: "late", Labels: map[string]string{LabelOwner: dead}},
	}
	removed, err := Reap(context.Background(), e, self, ReapOptions{})
	if err != nil || len(e.resources) != 0 || len(removed) != 3 {
		t.Errorf("removed %v (%v); left %v", removed, err, e.resources)
	}
	// A reaper that keeps finding the same failure stops.
	stuck := &engineCleaner{resources: []Resource{{Kind: "network", ID: "net", Name: "net", Labels: map[string]string{LabelOwner: dead}}, {Kind: KindContainer, ID: "mine", Labels: map[string]string{LabelOwner: self.String()}}}}
	if _, err := Reap(context.Background(), stuck, self, ReapOptions{}); err == nil || !strings.Contains(err.Error(), "remove network net: network has active endpoints") || stuck.lists > 2 {
		t.Errorf("a network that cannot go: %v after %d listings", err, stuck.lists)
	}
}
