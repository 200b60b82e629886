package main

import (
	"strings"
	"testing"
)

// These run against the real Docker Engine, like troupe would.

func TestDoctor(t *testing.T) {
	isolate(t)
	code, out, _ := troupe(t, "doctor")
	for _, check := range []string{"docker: engine", "base image: busybox:latest is present", "no-network container: one started", "disk:", "troupe binary:", "leftovers:"} {
		if !strings.Contains(out, check) {
			t.Errorf("doctor output lacks %q:\n%s", check, out)
		}
	}
	if code != exitOK && !strings.Contains(out, "FAIL  leftovers") && !strings.Contains(out, "FAIL  disk") {
		t.Errorf("doctor failed (exit %d):\n%s", code, out)
	}
}

func TestCleanDryRun(t *testing.T) {
	isolate(t)
	// Only a dry run here: other test packages run at the same time, and a
	// real clean could reap a container one of them is about to check.
	code, out, errOut := troupe(t, "clean", "--dry-run")
	if code != exitOK || (out != "nothing to clean\n" && !strings.HasPrefix(out, "would remove ")) {
		t.Errorf("exit %d: %q %q", code, out, errOut)
	}
}

func TestHiddenInsideCommands(t *testing.T) {
	isolate(t)
	_, out, _ := troupe(t, "--help")
	for _, hidden := range []string{"init", "sweep", "tunnel"} {
		if strings.Contains(out, "\n  "+hidden+" ") {
			t.Errorf("%s is listed in --help; it runs only inside containers", hidden)
		}
	}
	if code, _, errOut := troupe(t, "tunnel", "--listen", "no-equals-sign"); code != exitUsage || !strings.Contains(errOut, "ADDR=NAME") {
		t.Errorf("bad --listen: %d %s", code, errOut)
	}
}
