package runtime

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
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

func TestLoadBinary(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/text", []byte("#!/bin/sh\n"), 0o755)
	if _, err := LoadBinary(dir + "/text"); !errors.Is(err, ErrNotStatic) {
		t.Errorf("a script: %v", err)
	}
	if _, err := LoadBinary("/bin/sh"); !errors.Is(err, ErrNotStatic) && !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a dynamic executable: %v", err)
	}
	if testing.Short() {
		return
	}
	// The caller's GOFLAGS stay out of the static build: -race (a race
	// build of troupe run by go run, with GOFLAGS=-race) needs cgo.
	t.Setenv("GOFLAGS", "-race")
	if err := BuildBinary(t.Context(), "..", dir+"/troupe"); err != nil {
		t.Fatal(err)
	}
	b, err := LoadBinary(dir + "/troupe")
	if err != nil || len(b.SHA256) != 64 || len(b.Data) < 1<<20 {
		t.Fatalf("a static build: %v", err)
	}
}
