//go:build linux

package inside

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/troupebench/troupe/internal/atomicfile"
)

// A task's image may start something of its own in its ENTRYPOINT (a
// daemon, a configuration written at start) that its verifier counts on.
// Harbor keeps the image's ENTRYPOINT and replaces only its command, with
// `sh -c "sleep infinity"`; troupe init, the container's PID 1, starts
// that same process as its child (Main), as the image's user, in its
// working folder, with the container's environment, and keeps its output
// and its end on the record (MainLog, MainStatusFile).

// Main is the image's own first process as troupe init starts it: the
// command Docker would have run (ENTRYPOINT + command), as the image's
// user, in its working folder.
type Main struct {
	// Cmd is the command and its arguments; empty starts nothing.
	Cmd []string `json:"cmd"`
	// User is the image's USER as LookupUser takes it; "" is root.
	User string `json:"user,omitempty"`
	// WorkDir is the folder it starts in; "" is /.
	WorkDir string `json:"workdir,omitempty"`
}

// Where troupe init keeps the record of the main process: its output (the
// first MaxMainLog bytes, readable by root alone) and its status.
const (
	MainLog        = "/run/troupe/entrypoint.log"
	MainStatusFile = "/run/troupe/entrypoint.json"
	// MaxMainLog bounds the kept output; what follows is counted, not kept.
	MaxMainLog = 1 << 20
)

// MainStatus is what became of the main process: the result's entrypoint
// record.
type MainStatus struct {
	Cmd  []string `json:"cmd"`
	User string   `json:"user,omitempty"`
	PID  int      `json:"pid,omitempty"`
	// StartError says why it could not be started at all.
	StartError string `json:"start_error,omitempty"`
	// Exited is set once it ended, with its exit code or the signal that
	// ended it; a main process that runs on (sleep infinity) has neither.
	Exited   bool      `json:"exited"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Signal   string    `json:"signal,omitempty"`
	ExitedAt time.Time `json:"exited_at,omitzero"`
	// OutputDropped counts the bytes of its output past MaxMainLog.
	OutputDropped int64 `json:"output_dropped,omitempty"`
}

// ReadMainStatus reads the main process's status as troupe init wrote it;
// nil when init started none.
func ReadMainStatus() (*MainStatus, error) {
	data, err := readRegular(MainStatusFile, 1<<20)
	if data == nil || err != nil {
		return nil, err
	}
	var st MainStatus
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("read %s: %w", MainStatusFile, err)
	}
	return &st, nil
}

// ReadMainLog reads the main process's kept output.
func ReadMainLog() ([]byte, error) {
	return readRegular(MainLog, MaxMainLog)
}

// readRegular reads at most limit bytes of a file troupe init wrote; nil
// when there is none. An agent running as root may have put something
// else there: only a regular file is read, not a link, a FIFO or a device.
func readRegular(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// mainProc is the running main process, as Init follows it: its output
// copied into MainLog by a goroutine Init owns, its status rewritten when
// it ends.
type mainProc struct {
	status  MainStatus
	mu      sync.Mutex // status.OutputDropped, written by the copier
	out     *os.File   // the pipe's read end
	log     *os.File
	copying sync.WaitGroup
}

// startMain starts the main process through troupe exec-as (which sets up
// the user, its groups and HOME and the working folder as Docker would)
// with its output on a pipe that a goroutine copies into MainLog. A main
// process that cannot start is on the record (StartError), not an error
// of init's: the trial goes on without it.
func startMain(m Main) *mainProc {
	mp := &mainProc{status: MainStatus{Cmd: m.Cmd, User: m.User}}
	fail := func(err error) *mainProc {
		mp.status.StartError = err.Error()
		mp.writeStatus()
		return mp
	}
	if err := os.MkdirAll(filepath.Dir(MainLog), 0o755); err != nil {
		return fail(err)
	}
	log, err := os.OpenFile(MainLog, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fail(err)
	}
	self, err := os.Executable()
	if err != nil {
		log.Close()
		return fail(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		log.Close()
		return fail(err)
	}
	// A subreaper: what it starts and orphans (a daemon) stays its
	// descendant, as under Docker, where it would be PID 1.
	args := append([]string{self, "exec-as", "--subreaper", "--user", m.User, "--workdir", cmp.Or(m.WorkDir, "/"), "--"}, m.Cmd...)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		log.Close()
		r.Close()
		w.Close()
		return fail(err)
	}
	// Its own session, as a container's first process is: the agents'
	// signals to a process group never reach it by accident.
	pid, err := syscall.ForkExec(self, args, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{devnull.Fd(), w.Fd(), w.Fd()},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	devnull.Close()
	w.Close()
	if err != nil {
		log.Close()
		r.Close()
		return fail(fmt.Errorf("start %v: %w", m.Cmd, err))
	}
	mp.status.PID, mp.out, mp.log = pid, r, log
	mp.writeStatus()
	mp.copying.Go(mp.copyOutput)
	return mp
}

// copyOutput copies the main process's output (and that of whatever it
// started that kept it) into MainLog until the pipe is closed: the first
// MaxMainLog bytes kept, the rest drained and counted, so that a chatty
// daemon never blocks on a full pipe.
func (mp *mainProc) copyOutput() {
	buf := make([]byte, 32<<10)
	var kept int64
	for {
		n, err := mp.out.Read(buf)
		if n > 0 {
			keep := min(int64(n), max(0, MaxMainLog-kept))
			if keep > 0 {
				mp.log.Write(buf[:keep])
				kept += keep
			}
			if drop := int64(n) - keep; drop > 0 {
				mp.mu.Lock()
				mp.status.OutputDropped += drop
				mp.mu.Unlock()
			}
		}
		if err != nil {
			return
		}
	}
}

// ended records the main process's end, as wait4 gave it.
func (mp *mainProc) ended(ws syscall.WaitStatus) {
	mp.mu.Lock()
	mp.status.Exited, mp.status.ExitedAt = true, time.Now().UTC()
	switch {
	case ws.Signaled():
		mp.status.Signal = ws.Signal().String()
	default:
		code := ws.ExitStatus()
		mp.status.ExitCode = &code
	}
	mp.mu.Unlock()
	mp.writeStatus()
}

// writeStatus writes the status file whole (atomically).
func (mp *mainProc) writeStatus() {
	mp.mu.Lock()
	data, _ := json.Marshal(mp.status)
	mp.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(MainStatusFile), 0o755); err != nil {
		return
	}
	atomicfile.Write(MainStatusFile, data)
}

// close stops the copier (the pipe's read end closed unblocks it), waits
// for it, and writes the status with the dropped count.
func (mp *mainProc) close() {
	if mp == nil || mp.out == nil {
		return
	}
	mp.out.Close()
	mp.copying.Wait()
	mp.log.Close()
	mp.writeStatus()
}
