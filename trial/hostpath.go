package trial

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task"
)

// HostPathRule is one host path the user lets tasks bind (troupe run
// --allow-host-path PATH[:rw], or allow_host_paths in the config file):
// that path and everything under it, read-only unless Write.
type HostPathRule struct {
	Path  string
	Write bool
}

// ParseHostPathRule reads PATH, PATH:ro or PATH:rw (a path that itself
// ends in ":rw" is written PATH:rw:ro).
func ParseHostPathRule(s string) (HostPathRule, error) {
	r := HostPathRule{Path: s}
	switch {
	case strings.HasSuffix(s, ":rw"):
		r.Path, r.Write = strings.TrimSuffix(s, ":rw"), true
	case strings.HasSuffix(s, ":ro"):
		r.Path = strings.TrimSuffix(s, ":ro")
	}
	if r.Path == "" {
		return r, fmt.Errorf("host path %q: give a folder or file of this host, PATH or PATH:rw", s)
	}
	return r, nil
}

// String is the rule as ParseHostPathRule reads it back.
func (r HostPathRule) String() string {
	switch {
	case r.Write:
		return r.Path + ":rw"
	case strings.HasSuffix(r.Path, ":rw"), strings.HasSuffix(r.Path, ":ro"):
		return r.Path + ":ro"
	}
	return r.Path
}

// HostPaths is the user's say over the host paths tasks bind: a bind is
// mounted when its path, links resolved, is an allowed path or under one,
// read-only unless that path's rule allows writes (or the compose file
// itself says ":ro"); any other is refused. Never, whatever is allowed:
// the host's root, /proc, /sys, /dev, a socket or device, or a folder
// that holds the container engine's socket (the task would get the host).
// The zero value allows nothing.
type HostPaths struct {
	rules   []hostRule
	protect []string
}

// hostRule is a rule with its path resolved.
type hostRule struct {
	HostPathRule
	real string
}

// engineSockets are the container engines' usual sockets: a bind of one,
// or of a folder holding one, gives whoever holds it the whole host.
var engineSockets = []string{"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/run/podman/podman.sock", "/var/run/crio/crio.sock"}

// NewHostPaths resolves each rule's path (made absolute, every link
// resolved: it must exist) and refuses a rule that would allow what is
// never mounted. protect are more paths no bind may reach or hold (the
// engine's socket when DOCKER_HOST names one elsewhere).
func NewHostPaths(rules []HostPathRule, protect ...string) (HostPaths, error) {
	h := HostPaths{}
	for _, p := range append(slices.Clone(engineSockets), protect...) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		h.protect = append(h.protect, filepath.Clean(p))
	}
	var errs []error
	for _, r := range rules {
		real, err := resolveHost(r.Path)
		if err == nil {
			err = h.dangerous(real)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--allow-host-path %s: %w", r, err))
			continue
		}
		h.rules = append(h.rules, hostRule{HostPathRule: r, real: real})
	}
	return h, errors.Join(errs...)
}

// resolveHost is p made absolute with every link resolved.
func resolveHost(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s does not exist on this host (troupe creates no host folder)", abs)
	}
	return real, err
}

// dangerous says why a resolved host path is never mounted, nil when it
// may be.
func (h HostPaths) dangerous(real string) error {
	if real == "/" {
		return errors.New("the host's root is never mounted: allow a folder")
	}
	for _, sys := range []string{"/proc", "/sys", "/dev"} {
		if within(real, sys) {
			return fmt.Errorf("%s is under %s: the kernel's and devices' files are never mounted", real, sys)
		}
	}
	for _, p := range h.protect {
		if within(p, real) {
			return fmt.Errorf("%s is or holds the container engine's socket %s, which would give the task the host: never mounted", real, p)
		}
	}
	info, err := os.Stat(real)
	if err != nil {
		return err
	}
	if !info.IsDir() && !info.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s, not a folder or a file: never mounted", real, kind(info.Mode()))
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	}
	return "special file"
}

// within reports whether p is dir or under it (both clean and absolute).
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// HostBind is a task's bind as a trial mounts it.
type HostBind struct {
	task.HostMount
	// Host is the host path mounted: Source with every link resolved.
	Host string
	// Write is whether the service may write there.
	Write bool
}

// HostPathError is a task's bind that is not mounted: no rule allows it,
// or it is a path never mounted.
type HostPathError struct {
	Task  string
	Mount task.HostMount
	Err   error
}

func (e *HostPathError) Error() string {
	return fmt.Sprintf("task %s: service %s binds host path %s (at %s): %v", e.Task, e.Mount.Service, e.Mount.Source, e.Mount.Target, e.Err)
}

func (e *HostPathError) Unwrap() error { return e.Err }

// ErrHostPathNotAllowed is a bind no rule allows.
var ErrHostPathNotAllowed = errors.New("not allowed")

// Binds are the task's binds as a trial mounts them, or an error naming
// each that is not mounted (a *HostPathError each, joined).
func (h HostPaths) Binds(t *task.Task) ([]HostBind, error) {
	var out []HostBind
	var errs []error
	for _, m := range t.HostMounts() {
		b, err := h.bind(m)
		if err != nil {
			errs = append(errs, &HostPathError{Task: t.Name, Mount: m, Err: err})
			continue
		}
		out = append(out, b)
	}
	return out, errors.Join(errs...)
}

// bind resolves one bind against the rules: the most specific rule that
// holds its real path decides whether it may write.
func (h HostPaths) bind(m task.HostMount) (HostBind, error) {
	real, err := resolveHost(m.Source)
	if err == nil {
		err = h.dangerous(real)
	}
	if err != nil {
		return HostBind{}, err
	}
	var best *hostRule
	for i, r := range h.rules {
		if within(real, r.real) && (best == nil || len(r.real) > len(best.real)) {
			best = &h.rules[i]
		}
	}
	if best == nil {
		how := "allow it with troupe run --allow-host-path " + m.Source + " (read-only; add :rw to let it write) or allow_host_paths in the config file"
		if real != m.Source {
			how = fmt.Sprintf("it leads to %s; %s", real, strings.Replace(how, m.Source, real, 1))
		}
		return HostBind{}, fmt.Errorf("%w: %s", ErrHostPathNotAllowed, how)
	}
	return HostBind{HostMount: m, Host: real, Write: best.Write && !m.ReadOnly}, nil
}

// Check is Binds for every task of a job, before any container starts:
// every bind that is not mounted, joined.
func (h HostPaths) Check(tasks []*task.Task) error {
	var errs []error
	for _, t := range tasks {
		if _, err := h.Binds(t); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// serviceMounts are a service's binds for the runtime.
func serviceMounts(binds []HostBind, service string) []runtime.Mount {
	var out []runtime.Mount
	for _, b := range binds {
		if b.Service == service {
			out = append(out, runtime.Mount{Source: b.Host, Target: b.Target, ReadOnly: !b.Write})
		}
	}
	return out
}

// mainMounts are the trial container's binds (the main service's): the
// agents see them as the verifier does.
func (r *run) mainMounts() []runtime.Mount {
	return serviceMounts(r.binds, task.MainService)
}
