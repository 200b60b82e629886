//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// stopWithGoRun makes a troupe that go run started end when go does. Killed
// with SIGKILL, go run leaves its child running, unseen, its containers
// labelled with an owner that is alive: the next run and troupe clean leave
// them all. The kernel sends this process SIGTERM when go dies
// (PR_SET_PDEATHSIG), which troupe takes as a first Ctrl+C: it stops, removes
// its containers and writes its results. Any other parent may go away on
// purpose (nohup, a shell that exits) and is not watched.
func stopWithGoRun() {
	exe, err := os.Executable()
	if err != nil || !strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return
	}
	parent := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", parent))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		return
	}
	// go may have died before the request: then no signal comes.
	if os.Getppid() != parent {
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
