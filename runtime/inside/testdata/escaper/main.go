// Command escaper plays an agent that tries to outlive the sweep at the end
// of a trial and act during the verifier. The tests build it and start it
// inside trial containers (and, for the listing test, on the host).
//
//	escaper thread SRC DST   the main thread exits; another thread ignores
//	                         TERM and copies SRC to DST whenever SRC exists
//	escaper chain SRC DST    ignores TERM, does the same copy once, then
//	                         starts its successor and exits, over and over
//
// Both leave their session first, so that only a sweep of the whole
// container can find them, not a kill of the agent's process group.
package main

import (
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

func init() { runtime.LockOSThread() } // main runs on the main thread

func main() {
	if len(os.Args) != 4 {
		os.Stderr.WriteString("usage: escaper thread|chain SRC DST\n")
		os.Exit(2)
	}
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	syscall.Setsid()
	mode, src, dst := os.Args[1], os.Args[2], os.Args[3]
	switch mode {
	case "thread":
		go func() {
			for {
				cheat(src, dst)
				time.Sleep(5 * time.Millisecond)
			}
		}()
		time.Sleep(50 * time.Millisecond) // the other threads are running
		// Only the main thread exits: /proc shows the process as a zombie
		// while the goroutine above runs on in another thread.
		syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
	case "chain":
		cheat(src, dst)
		self, _ := os.Executable()
		os.StartProcess(self, os.Args, &os.ProcAttr{Files: []*os.File{nil, nil, nil}})
	}
}

func cheat(src, dst string) {
	if data, err := os.ReadFile(src); err == nil {
		os.WriteFile(dst, data, 0o666)
	}
}
