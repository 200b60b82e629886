package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
)

// TestLink cuts a container on a bridge network off with troupe link down,
// as a Kubernetes init container with NET_ADMIN does to a pod, and
// restores it with troupe link up and the routes down printed.
func TestLink(t *testing.T) {
	rt := testDocker(t)
	net, gateway := testNetwork(t, rt)
	box := startBox(t, rt, container.HostConfig{NetworkMode: container.NetworkMode(net), CapAdd: []string{"NET_ADMIN"}})
	gw := netip.MustParseAddr(gateway)
	link := func(args ...string) (inside.Routes, string) {
		t.Helper()
		stdout, stderr, code, _ := box.run(t, append([]string{runtime.BinaryPath, "link"}, args...)...)
		var routes inside.Routes
		if err := json.Unmarshal([]byte(stdout), &routes); code != 0 || err != nil || strings.Count(stdout, "\n") != 1 || routes.Routes == nil {
			t.Fatalf("troupe link %s: exit %d, %v\n%s%s", strings.Join(args, " "), code, err, stdout, stderr)
		}
		return routes, stdout
	}
	isDefault := func(r inside.Route) bool {
		return r.Interface == "eth0" && r.Destination == netip.IPv4Unspecified() && r.Mask == netip.IPv4Unspecified() && r.Gateway == gw && r.Flags&2 != 0
	}
	wget := "timeout 3 wget -qO- http://" + gateway + ":1/ 2>&1; true"

	// Kubernetes gives the container a termination log; down writes to it.
	box.sh(t, "touch /dev/termination-log")
	down, line := link("down")
	if !slices.ContainsFunc(down.Routes, isDefault) {
		t.Fatalf("link down did not report the default route via %s: %s", gateway, line)
	}
	if got := box.sh(t, "cat /dev/termination-log"); got != line {
		t.Errorf("the termination log holds %q; stdout was %q", got, line)
	}
	if state := box.sh(t, "cat /sys/class/net/eth0/operstate"); state != "down\n" {
		t.Errorf("eth0 is %q after link down", state)
	}
	if out := box.sh(t, wget); !strings.Contains(out, "Network is unreachable") {
		t.Errorf("wget of the gateway after link down: %q; want Network is unreachable", out)
	}
	if table := box.sh(t, "cat /proc/net/route"); strings.Contains(table, "eth0") {
		t.Errorf("routes left after link down:\n%s", table)
	}
	// Again: nothing left to take away.
	if again, line := link("down"); len(again.Routes) != 0 || line != `{"routes":[]}`+"\n" {
		t.Errorf("a second link down printed %q", line)
	}

	up, line := link("up", "--routes", mustJSON(t, down))
	if !slices.ContainsFunc(up.Routes, isDefault) {
		t.Errorf("link up did not report the default route back: %s", line)
	}
	gwHex := fmt.Sprintf("%02X%02X%02X%02X", gw.As4()[3], gw.As4()[2], gw.As4()[1], gw.As4()[0])
	if table := box.sh(t, "cat /proc/net/route"); !strings.Contains(table, "eth0\t00000000\t"+gwHex+"\t0003") {
		t.Errorf("no default route via %s (%s) after link up:\n%s", gateway, gwHex, table)
	}
	if state := box.sh(t, "cat /sys/class/net/eth0/operstate"); state != "up\n" {
		t.Errorf("eth0 is %q after link up", state)
	}
	if out := box.sh(t, wget); strings.Contains(out, "unreachable") {
		t.Errorf("wget of the gateway after link up: %q", out)
	}
	// Again: every route is there already.
	if again, line := link("up", "--routes", mustJSON(t, down)); !slices.ContainsFunc(again.Routes, isDefault) {
		t.Errorf("a second link up printed %q", line)
	}
}

// TestLinkNeedsNetAdmin: without the capability (a trial's own container)
// link down changes nothing and says what it lacks.
func TestLinkNeedsNetAdmin(t *testing.T) {
	rt := testDocker(t)
	net, _ := testNetwork(t, rt)
	box := startBox(t, rt, container.HostConfig{NetworkMode: container.NetworkMode(net)})
	stdout, stderr, code, _ := box.run(t, runtime.BinaryPath, "link", "down")
	if code != exitFailed || !strings.Contains(stderr, "set eth0 down: operation not permitted (troupe link needs the NET_ADMIN capability)") {
		t.Errorf("link down without NET_ADMIN: exit %d\n%s%s", code, stdout, stderr)
	}
	if state := box.sh(t, "cat /sys/class/net/eth0/operstate"); state != "up\n" {
		t.Errorf("eth0 is %q", state)
	}
	if _, stderr, code, _ := box.run(t, runtime.BinaryPath, "link", "up", "--routes", "not json"); code != exitUsage || !strings.Contains(stderr, "--routes") {
		t.Errorf("link up with bad JSON: exit %d %s", code, stderr)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestLinkAndExecAsAreHidden: the commands a backend runs in its pods are
// not listed in --help; a user never runs them on the host.
func TestLinkAndExecAsAreHidden(t *testing.T) {
	isolate(t)
	_, out, _ := troupe(t, "--help")
	for _, hidden := range []string{"exec-as", "link", "copy-self"} {
		if strings.Contains(out, "\n  "+hidden+" ") {
			t.Errorf("%s is listed in --help; it runs only inside containers", hidden)
		}
		if code, _, stderr := troupe(t, hidden, "--help"); code != exitOK || stderr != "" {
			t.Errorf("%s --help: exit %d %s", hidden, code, stderr)
		}
	}
}
