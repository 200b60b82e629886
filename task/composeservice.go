package task

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/runtime"
)

// Service keys by what troupe does with them. Keys not listed are refused:
// they would give a service the host's resources or privileges.
var (
	// honoured for every service.
	serviceHonoured = []string{"image", "build", "environment", "env_file", "depends_on"}
	// honoured for sidecars; the main service is troupe's (its PID 1 is
	// troupe init, its user and folder the task's).
	sidecarHonoured = []string{"command", "entrypoint", "working_dir", "user", "healthcheck", "cpus", "mem_limit", "pids_limit", "deploy"}
	// left out, with a warning: they change nothing a trial relies on, or
	// are troupe's to decide (names, networks, resources).
	serviceIgnored = map[string]string{
		"container_name": "troupe names containers", "hostname": "a service is reached by its name",
		"networks": "every service is on the trial's network", "network_mode": "troupe gives the network the task's policy says",
		"ports": "troupe publishes no port", "expose": "every port is open on the trial's network",
		"restart": "services live as long as the trial", "deploy": "the task's cpus and memory apply to the trial container",
		"cpus": "not limited", "mem_limit": "not limited", "mem_reservation": "not limited", "pids_limit": "not limited",
		"labels": "troupe labels what it creates", "logging": "troupe reads no service log driver",
		"pull_policy": "images are local, pulled or built as for the task", "platform": "linux/amd64",
		"stop_signal": "services are removed with the trial", "stop_grace_period": "services are removed with the trial",
		"init": "as the image", "tty": "no terminal", "stdin_open": "no input", "extra_hosts": "not added", "dns": "Docker's", "dns_search": "Docker's",
		"dns_opt": "Docker's", "shm_size": "Docker's default", "ulimits": "Docker's default", "healthcheck": "the task's [environment.healthcheck] is the trial container's",
		"command": "the trial container runs troupe init", "entrypoint": "the trial container runs troupe init",
		"working_dir": "[environment] workdir, else the image's WORKDIR", "user": "agents run as troupe decides; the verifier as [verifier] user",
		"profiles": "every service runs", "annotations": "none", "tmpfs": "not mounted", "attach": "no output is followed",
	}
)

// serviceCheck is one service being converted: what troupe refuses of it
// and what it leaves out, each at a key of the service.
type serviceCheck struct {
	file, name     string
	main           bool
	errs, warnings []*located.Error
	// mounts are the service's binds of host paths (hostpath.go).
	mounts []HostMount
}

func (c *serviceCheck) at(key, format string, args ...any) *located.Error {
	return &located.Error{File: c.file, Path: "services." + c.name + "." + key, Err: fmt.Errorf(format, args...)}
}

func (c *serviceCheck) refuse(key, format string, args ...any) {
	c.errs = append(c.errs, c.at(key, format, args...))
}

func (c *serviceCheck) warn(key, format string, args ...any) {
	c.warnings = append(c.warnings, c.at(key, format, args...))
}

// composeService checks one service and converts what troupe runs of it.
// It returns the service, the warnings and the problems.
func composeService(taskDir, file string, sc types.ServiceConfig) (Service, []*located.Error, []*located.Error) {
	c := &serviceCheck{file: file, name: sc.Name, main: sc.Name == MainService}
	keys, err := setKeys(sc)
	if err != nil {
		return Service{}, nil, []*located.Error{{File: file, Path: "services." + sc.Name, Err: err}}
	}
	for _, k := range keys {
		c.key(sc, k)
	}
	if sc.GetScale() > 1 {
		c.refuse("deploy", "more than one replica is not supported")
	}
	s := Service{Name: sc.Name, Image: sc.Image, Entrypoint: sc.Entrypoint, Command: sc.Command, WorkDir: sc.WorkingDir, User: sc.User}
	if c.main {
		s.Entrypoint, s.Command, s.WorkDir, s.User = nil, nil, "", ""
	} else {
		s.CPUs, s.MemoryMB, s.Pids = limits(sc)
	}
	if sc.Build != nil {
		c.build(&s, taskDir, sc.Build)
	}
	if s.Image == "" && s.BuildDir == "" {
		c.refuse("image", "a service needs an image or a build")
	}
	if len(sc.Environment) > 0 {
		s.Env = map[string]string{}
		for k, v := range sc.Environment {
			if v != nil {
				s.Env[k] = *v
			}
		}
	}
	if hc := sc.HealthCheck; hc != nil && !c.main && !hc.Disable {
		h := &runtime.Healthcheck{Test: hc.Test, Interval: dur(hc.Interval), Timeout: dur(hc.Timeout), StartPeriod: dur(hc.StartPeriod)}
		if hc.Retries != nil {
			h.Retries = int(*hc.Retries)
		}
		s.Healthcheck = h
	}
	s.DependsOn = c.dependsOn(sc.DependsOn)
	s.HostMounts = c.mounts
	return s, c.warnings, c.errs
}

// key checks one key the service sets: honoured, left out with a
// warning, or refused.
func (c *serviceCheck) key(sc types.ServiceConfig, k string) {
	switch {
	case slices.Contains(serviceHonoured, k), !c.main && slices.Contains(sidecarHonoured, k):
	case k == "networks" && len(sc.Networks) == 1 && sc.Networks["default"] == nil:
		// the loader's own default network
	case k == "volumes":
		for _, v := range sc.Volumes {
			c.volume(v)
		}
	case c.main && (k == "command" || k == "entrypoint") && !idles(sc.Entrypoint, sc.Command):
		c.warn(k, "not run: the trial container's first process is troupe init, and what runs beside the agents is swept before the verifier; put setup in the Dockerfile, or a server in a service of its own")
	case serviceIgnored[k] != "":
		if !c.main || !harborTemplate(k) {
			c.warn(k, "ignored: %s", serviceIgnored[k])
		}
	default:
		c.refuse(k, "not supported: troupe gives no service the host's devices, namespaces or privileges, nor files but the host paths the user allows (volumes)")
	}
}

// limits are a sidecar's own limits: the older keys or
// deploy.resources.limits (compose's loader refuses the two with
// different values).
func limits(sc types.ServiceConfig) (cpus float64, memoryMB, pids int64) {
	cpus, memoryMB, pids = float64(sc.CPUS), int64(sc.MemLimit)>>20, sc.PidsLimit
	if d := sc.Deploy; d != nil && d.Resources.Limits != nil {
		l := d.Resources.Limits
		cpus = cmp.Or(float64(l.NanoCPUs), cpus)
		memoryMB = cmp.Or(int64(l.MemoryBytes)>>20, memoryMB)
		pids = cmp.Or(l.Pids, pids)
	}
	return cpus, memoryMB, pids
}

// build takes what the service is built from, inside the task's folder.
func (c *serviceCheck) build(s *Service, taskDir string, b *types.BuildConfig) {
	if len(b.Args) > 0 || b.Target != "" || len(b.AdditionalContexts) > 0 || b.DockerfileInline != "" {
		c.refuse("build", "build args, targets, inline Dockerfiles and extra contexts are not supported yet")
	}
	rel, err := filepath.Rel(taskDir, b.Context)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		c.refuse("build", "context %s is outside the task's folder", b.Context)
	}
	s.BuildDir, s.Image = b.Context, ""
	if b.Dockerfile != "" && b.Dockerfile != "Dockerfile" {
		s.Dockerfile = b.Dockerfile
		if !filepath.IsLocal(b.Dockerfile) {
			c.refuse("build", "dockerfile %s must be a file inside the context", b.Dockerfile)
		}
	}
}

// dependsOn checks the services this one waits for, and how.
func (c *serviceCheck) dependsOn(deps types.DependsOnConfig) []runtime.Dependency {
	var out []runtime.Dependency
	for _, dep := range slices.Sorted(maps.Keys(deps)) {
		cond := deps[dep].Condition
		switch cond {
		case "", runtime.DependStarted, runtime.DependHealthy, runtime.DependCompleted:
		default:
			c.refuse("depends_on", "%s: condition %q is not %s, %s or %s", dep, cond, runtime.DependStarted, runtime.DependHealthy, runtime.DependCompleted)
		}
		if dep == MainService {
			c.refuse("depends_on", "no service may depend on %s: it starts last", MainService)
		}
		out = append(out, runtime.Dependency{Service: dep, Condition: cmpOr(cond, runtime.DependStarted)})
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// harborTemplate reports whether a key is one Harbor's own compose files
// set for the main service, and troupe drops without a word.
func harborTemplate(key string) bool {
	switch key {
	case "command", "entrypoint", "network_mode", "deploy", "pull_policy", "healthcheck":
		return true
	}
	return false
}

// idles reports whether a command only keeps a container alive (Harbor's
// "sleep infinity"), which troupe init does too.
func idles(entrypoint, command []string) bool {
	words := strings.Fields(strings.Join(append(slices.Clone(entrypoint), command...), " "))
	for len(words) > 0 && (words[0] == "sh" || words[0] == "bash" || words[0] == "/bin/sh" || words[0] == "/bin/bash" || strings.HasPrefix(words[0], "-")) {
		words = words[1:]
	}
	return len(words) == 0 || len(words) == 2 && strings.Trim(words[0], `"'`) == "sleep" && strings.Trim(words[1], `"'`) == "infinity"
}

// setKeys lists the keys a service sets, by their compose names.
func setKeys(sc types.ServiceConfig) ([]string, error) {
	data, err := json.Marshal(sc)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	var keys []string
	for k, v := range m {
		switch string(v) {
		case "null", "[]", "{}", "false", "0", `""`:
			continue
		}
		if k == "scale" {
			continue // checked with the replicas
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

func dur(d *types.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return time.Duration(*d)
}
