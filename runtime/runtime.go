// Package runtime is where trial containers live: the types a trial and
// a container backend share, and the Container a backend's Create returns
// (copy in, start, network on and off, exec, copy out, remove). The
// backends are its sub-packages, runtime/docker (the Docker Engine API)
// and runtime/kubernetes (a pod per trial); each consumer declares what
// it needs of a backend (trial.Backend, cmd/troupe's backend), and
// runtime/runtimetest is the conformance suite both pass.
//
// Everything a backend creates carries troupe's labels, among them the
// Owner: the host, boot, process id and process start time of the troupe
// process that created it. Reap removes what dead owners left behind, so a
// crash never leaks containers.
//
// The in-container side lives in sub-packages too: runtime/inside (troupe
// init and troupe sweep) and runtime/tunnel (the multiplexed stream over an
// exec's stdin and stdout that is a no-network container's only way out).
package runtime

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// Label keys on every resource troupe creates.
const (
	LabelJob     = "troupe.job"
	LabelTrial   = "troupe.trial"
	LabelOwner   = "troupe.owner"
	LabelVersion = "troupe.version"
)

// Network modes of a container.
const (
	// NetworkNone gives a container no network at all: it reaches the relay
	// and the gateway only through the tunnel.
	NetworkNone = "none"
	// NetworkBridge gives a container a network of its own with internet
	// access, for tasks that ask for it.
	NetworkBridge = "bridge"
)

// Image is an available image: the reference to create containers from, and
// what the trial needs to know of its configuration.
type Image struct {
	Ref string
	// WorkDir is the image's working folder (its WORKDIR); "" when unset.
	WorkDir string
	// User is the image's default user (its USER: a name or uid, with an
	// optional group); "" means root.
	User string
	// Entrypoint and Cmd are the image's ENTRYPOINT and CMD: what Docker
	// would start as its first process. A backend that cannot read them
	// (Kubernetes) leaves them nil.
	Entrypoint, Cmd []string
}

// Container is a container a backend created: Create returns it, not
// started, and a trial does everything else with its container through
// it. The backend's Remove reaches the same container by its ID once the
// handle is gone (the reaper, troupe clean, a trial's removal by label).
//
// A backend may offer more for a container, which a trial finds by a type
// assertion on the handle: Changes (runtime/docker: what differs from the
// image) and Sidecars (runtime/docker: the compose services started with
// it).
type Container interface {
	// ID is the container's id on its backend: the Resource.ID it is
	// listed and removed by.
	ID() string
	// CopyIn writes files (and their folders) into the container, with
	// the owner and mode given, before or after it starts.
	CopyIn(ctx context.Context, files []File) error
	// Start starts the container.
	Start(ctx context.Context) error
	// SetOnline attaches a container created with NetworkBridge to its
	// network (online) or detaches it, leaving it loopback only, before or
	// after it starts: a trial's phases may each have their own network.
	SetOnline(ctx context.Context, online bool) error
	// Exec runs a process in the started container, streaming its output
	// to the writers as it arrives.
	Exec(ctx context.Context, spec ExecSpec) (Process, error)
	// CopyOut copies a file or folder out of the container into dst (a
	// folder opened with os.OpenRoot, so nothing can be written outside
	// it) under the name dstPath, at most limit bytes of files in all (0:
	// the backend's own bound). It never replaces a file already in dst
	// (what the caller wrote stays the record). Entries that are not plain
	// files or folders, collisions, and files over the limit are skipped
	// and listed.
	CopyOut(ctx context.Context, src string, dst *os.Root, dstPath string, limit int64) (skipped []string, err error)
	// Remove removes the container by force, with what it brought (its
	// services, a network of its own), tolerating one already gone. It
	// runs even when ctx is cancelled, bounded by its own timeout.
	Remove(ctx context.Context) error
}

// ImageSpec names an image or says how to build one.
type ImageSpec struct {
	// Image is an image name (a task's docker_image); empty means build.
	Image string
	// Build, when set, makes the image when Image is empty or cannot be
	// found or pulled. A backend that cannot build says how to build it
	// elsewhere and make it available.
	Build *BuildSpec
}

// BuildSpec is an image to build: a task's environment.
type BuildSpec struct {
	// Context is the build context, a folder (a task's environment/).
	Context string
	// Dockerfile is the Dockerfile's name in Context; "" is Dockerfile.
	Dockerfile string
}

// Isolation is how a backend cuts a container off the network: what it
// enforces itself, and what it only asks of the platform (which may or
// may not enforce it).
type Isolation struct {
	Runtime   string `json:"runtime"`
	Enforced  string `json:"enforced"`
	Requested string `json:"requested,omitempty"`
}

// Check is one check of troupe doctor: what was checked, what was found,
// and, when it failed, the error and how to fix it.
type Check struct {
	Name, Detail string
	Err          error
	Fix          string
}

// CommitSpec describes an image made of a container's filesystem: the
// image the container was created from, and what was done in it. A
// backend that commits containers (runtime/docker's CommitOnce) keeps one
// image per Base image ID and Key.
type CommitSpec struct {
	// Base is the image the container is created from.
	Base string
	// Key says, with Base's image ID, what the image holds (a stack's
	// digest).
	Key string
	// Labels are added to troupe's own.
	Labels map[string]string
}

// ContainerSpec describes a container.
type ContainerSpec struct {
	Image      string
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkDir    string
	User       string
	// Labels are added to troupe's own (owner, version).
	Labels map[string]string
	// Network is NetworkNone (the default) or NetworkBridge; a bridge
	// container can be taken offline and back (Container.SetOnline).
	Network string
	// Binary, when set, is provided read-only at BinaryPath: troupe's own
	// binary, for init, tunnel, sweep and the agents. A backend may share
	// one copy between containers instead of copying it into each.
	Binary *Binary
	// CPUs, MemoryMB and Pids limit the container; zero is no limit.
	CPUs     float64
	MemoryMB int64
	Pids     int64
	// StorageMB limits what the container may write to its own
	// filesystem; zero is no limit. A backend that cannot enforce it
	// refuses the container rather than ignore it: a trial asks first
	// (runtime/docker's StorageLimit) and sets it only where it holds.
	StorageMB int64
	// Services are started first, in order, on a network of their own
	// that the container joins as "main" (internal: with no way out;
	// with NetworkBridge the services, and the container while online,
	// also reach the internet). DependsOn are the services the container
	// waits for. Removing the container removes them and their network.
	Services  []ServiceSpec
	DependsOn []Dependency
	// Mounts are host paths bound into the container: a task's compose
	// binds the user allowed (troupe run --allow-host-path). A backend
	// that cannot bind host paths refuses the container.
	Mounts []Mount
}

// Mount binds a host path (a folder or a file, resolved: no link on the
// way) at Target in a container; ReadOnly unless the user allowed writes.
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

// File is one file or folder to copy into a container.
type File struct {
	// Path is absolute inside the container.
	Path string
	Data []byte
	// Mode holds the permission bits; fs.ModeDir marks a folder.
	Mode     fs.FileMode
	UID, GID int
}

// ExecSpec describes a process to run in a container.
type ExecSpec struct {
	Cmd     []string
	Env     []string
	User    string
	WorkDir string
	// Stdin, when true, gives the process a standard input: Process.Stdin.
	Stdin bool
	// Stdout and Stderr receive the output as it arrives; nil discards.
	Stdout, Stderr io.Writer
}

// Process is a running exec. Its end is an event: Done is closed when the
// process has exited and all its output has been written.
type Process interface {
	// Stdin is the process's standard input when ExecSpec.Stdin was set;
	// closing it sends end-of-file.
	Stdin() io.WriteCloser
	Done() <-chan struct{}
	// Wait waits for Done and returns the exit code, or an error: an
	// *ExecError for 126 and 127, or why the process could not be followed.
	Wait(ctx context.Context) (int, error)
	// Close stops following the process and waits for the goroutines that
	// did; the process itself keeps running until swept or removed.
	Close() error
}

// KindContainer is the kind of a trial's container (a pod, on a backend
// that runs pods); a backend names its other kinds (networks, policies)
// itself. Reap removes containers first.
const KindContainer = "container"

// Resource is something a backend created.
type Resource struct {
	Kind    string
	ID      string
	Name    string
	Labels  map[string]string
	Created time.Time
}

func (r Resource) String() string {
	name := r.Name
	if name == "" && len(r.ID) > 12 {
		name = r.ID[:12]
	}
	return r.Kind + " " + name
}

// ExecError explains an exec that could not run its command.
type ExecError struct {
	Code   int
	Cmd    []string
	Output string
	Err    error // ErrNotFound or ErrNotExecutable
}

func (e *ExecError) Error() string {
	msg := e.Err.Error() + ": " + quoteCmd(e.Cmd)
	if e.Output != "" {
		msg += " (" + e.Output + ")"
	}
	return msg
}

func (e *ExecError) Unwrap() error { return e.Err }

// ClassifyExit turns a command's exit 126 or 127 into an *ExecError that
// says whether it was not found or not executable, from the code and the
// first of its output; any other code is the command's own: nil.
func ClassifyExit(cmd []string, code int, output string) error {
	if code != 126 && code != 127 {
		return nil
	}
	output = strings.TrimSpace(output)
	cause := ErrNotExecutable
	if code == 127 || strings.Contains(output, "not found") || strings.Contains(output, "no such file") {
		cause = ErrNotFound
	}
	return &ExecError{Code: code, Cmd: cmd, Output: output, Err: cause}
}

// Exec failures by cause.
var (
	ErrNotFound      = errors.New("command not found in the container")
	ErrNotExecutable = errors.New("command is not executable in the container")
)

func quoteCmd(cmd []string) string {
	out := ""
	for i, c := range cmd {
		if i > 0 {
			out += " "
		}
		out += c
	}
	return out
}

// ServiceSpec is a sidecar: a container started, before the trial
// container, on a network it shares with it, reachable by its name (a
// task's compose service).
type ServiceSpec struct {
	Name       string
	Image      string
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkDir    string
	User       string
	// Healthcheck, when set, is what DependHealthy waits for.
	Healthcheck *Healthcheck
	// DependsOn are the services it starts after, each when its condition
	// holds.
	DependsOn []Dependency
	// CPUs, MemoryMB and Pids limit the service's container as
	// ContainerSpec's limit the trial's; zero is no limit.
	CPUs     float64
	MemoryMB int64
	Pids     int64
	// Mounts are host paths bound into the service, as ContainerSpec's.
	Mounts []Mount
}

// Sidecar is a started service of a trial container: the container an
// exec reaches it by.
type Sidecar struct {
	Name, ID string
	Running  bool
	// Container is the service's container, for execs in it (its sweep);
	// removing the trial's container removes it.
	Container Container
}

// Healthcheck is a service's health test, run by the engine: Test is
// compose's form (["CMD", ...], ["CMD-SHELL", "..."] or ["NONE"]).
type Healthcheck struct {
	Test                           []string
	Interval, Timeout, StartPeriod time.Duration
	Retries                        int
}

// Dependency is a depends_on entry: a service, and what of it to wait for.
type Dependency struct {
	Service   string
	Condition string
}

// Dependency conditions, as compose names them.
const (
	DependStarted   = "service_started"
	DependHealthy   = "service_healthy"
	DependCompleted = "service_completed_successfully"
)

// Change is one path of a container's filesystem that differs from its
// image: what a backend that can diff (Docker's) reports, so that a trial
// can tell when its system files were changed before the verifier.
type Change struct {
	Path string `json:"path"`
	// Kind is ChangeModified, ChangeAdded or ChangeDeleted. A folder whose
	// content changed is reported as modified too.
	Kind string `json:"kind"`
}

// The kinds of a Change.
const (
	ChangeModified = "modified"
	ChangeAdded    = "added"
	ChangeDeleted  = "deleted"
)
