package task

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task/taskfs"
)

// ComposeFile is a task's compose file, in environment/.
const ComposeFile = "docker-compose.yaml"

// MainService is the compose service that is the trial container.
const MainService = "main"

// Compose is environment/docker-compose.yaml, read with the Compose
// specification's own loader, as troupe runs it: the main service is the
// trial container (its image or build, environment and depends_on; the
// rest is troupe's), and every other service is a sidecar on the trial's
// network.
type Compose struct {
	File string
	Main Service
	// Sidecars are the other services, ordered so that each comes after
	// the services it depends on.
	Sidecars []Service
}

// Service is one compose service: its image (local or pulled) or what to
// build it from, and how to run it.
type Service struct {
	Name  string
	Image string
	// BuildDir is the build context, inside the task's folder; Dockerfile
	// is the file's name in it ("" for Dockerfile).
	BuildDir, Dockerfile string
	Entrypoint, Command  []string
	Env                  map[string]string
	WorkDir, User        string
	Healthcheck          *runtime.Healthcheck
	DependsOn            []runtime.Dependency
	// CPUs, MemoryMB and Pids are a sidecar's own limits (cpus, mem_limit,
	// pids_limit, or deploy.resources.limits); zero is none. The trial
	// gives it the tighter of these and the task's.
	CPUs     float64
	MemoryMB int64
	Pids     int64
}

// hostLogs stands for Harbor's HOST_*_PATH variables: the host folders
// Harbor mounts for logs. troupe copies logs out instead, so mounts of
// these are dropped.
const hostLogs = "/troupe-host-logs"

// composeVars are the variables Harbor sets for a task's compose file.
func (t *Task) composeVars(envDir string) map[string]string {
	vars := map[string]string{
		"CONTEXT_DIR":             envDir,
		"MAIN_IMAGE_NAME":         "troupe-main",
		"TEST_DIR":                "/tests",
		"HOST_VERIFIER_LOGS_PATH": hostLogs + "/verifier",
		"HOST_AGENT_LOGS_PATH":    hostLogs + "/agent",
		"HOST_ARTIFACTS_PATH":     hostLogs + "/artifacts",
		"ENV_VERIFIER_LOGS_PATH":  "/logs/verifier",
		"ENV_AGENT_LOGS_PATH":     "/logs/agent",
		"ENV_ARTIFACTS_PATH":      "/logs/artifacts",
		"CPUS":                    fmt.Sprint(max(t.CPUs, 1)),
		"MEMORY":                  fmt.Sprintf("%dM", max(t.MemoryMB, 1024)),
	}
	if t.Image != "" {
		vars["PREBUILT_IMAGE_NAME"] = t.Image
	}
	maps.Copy(vars, t.Env)
	return vars
}

// loadCompose reads the task's compose file. Problems are the task's
// errors; what troupe leaves out of a service is a warning.
func (t *Task) loadCompose(d *taskfs.Dir, envDir string, getenv func(string) string) (*Compose, []string, error) {
	taskDir := d.Path()
	file := filepath.Join(envDir, ComposeFile)
	vars := t.composeVars(envDir)
	lookup := func(key string) (string, bool) {
		if v, ok := vars[key]; ok {
			return v, true
		}
		// Harbor passes its whole environment; a value taken from the
		// host is scrubbed like [environment] env's.
		v := getenv(key)
		if v == "" {
			return "", false
		}
		if t.FromHost == nil {
			t.FromHost = map[string]secret.Secret{}
		}
		t.FromHost[key] = secret.New(v)
		return v, true
	}
	// The main service is built from environment/ or is the task's image
	// unless the file says otherwise, as in Harbor.
	base := "services: {}\n"
	switch {
	case t.EnvDir != "":
		base = fmt.Sprintf("services:\n  %s:\n    build:\n      context: %q\n", MainService, envDir)
	case t.Image != "":
		base = fmt.Sprintf("services:\n  %s:\n    image: %q\n", MainService, t.Image)
	}
	files := inTask{dir: d, envDir: envDir}
	content, err := files.read(file)
	if err != nil {
		return nil, nil, err
	}
	details := types.ConfigDetails{
		WorkingDir:  envDir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(envDir, ".troupe-base.yaml"), Content: []byte(base)}, {Filename: file, Content: content}},
		Environment: vars,
	}
	project, err := loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("troupe", true)
		o.Interpolate.LookupValue = lookup
		o.ResolvePaths = true
		// Files the compose file names are read by troupe, from the task's
		// folder only: env files below, included and extended files
		// through this loader.
		o.SkipResolveEnvironment, o.SkipResolveLabels = true, true
		o.ResourceLoaders = []loader.ResourceLoader{files}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	for name, sc := range project.Services {
		env, err := files.environment(sc, vars)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: services.%s: %w", file, name, err)
		}
		sc.Environment = env
		project.Services[name] = sc
	}
	c := &Compose{File: file}
	var errs []error
	var warnings []string
	for _, name := range slices.Sorted(maps.Keys(project.Services)) {
		sc := project.Services[name]
		s, w, err := composeService(taskDir, file, sc)
		warnings = append(warnings, w...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if name == MainService {
			c.Main = s
		} else {
			c.Sidecars = append(c.Sidecars, s)
		}
	}
	for _, key := range []string{"volumes", "secrets", "configs", "models"} {
		if n := map[string]int{"volumes": len(project.Volumes), "secrets": len(project.Secrets), "configs": len(project.Configs), "models": len(project.Models)}[key]; n > 0 {
			errs = append(errs, fmt.Errorf("%s: top-level %s: not supported (trials have no state or host files beyond the task's image)", file, key))
		}
	}
	if len(project.Networks) > 1 || len(project.Networks) == 1 && project.Networks["default"].Name == "" {
		warnings = append(warnings, fmt.Sprintf("%s: top-level networks: ignored: every service is on the trial's own network", file))
	}
	// The loader would only log it: a variable the file takes whole, which
	// neither Harbor's variables, the task's env nor the host set.
	for _, m := range plainVar.FindAllStringSubmatch(string(content), -1) {
		if _, ok := lookup(m[1]); !ok && !slices.Contains(warnings, unsetWarning(file, m[1])) {
			warnings = append(warnings, unsetWarning(file, m[1]))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, warnings, err
	}
	c.Sidecars, err = startOrder(file, c.Sidecars)
	if err != nil {
		return nil, warnings, err
	}
	for _, d := range c.Main.DependsOn {
		if !slices.ContainsFunc(c.Sidecars, func(s Service) bool { return s.Name == d.Service }) {
			return nil, warnings, fmt.Errorf("%s: services.%s.depends_on: %q is not a service of the file", file, MainService, d.Service)
		}
	}
	return c, warnings, nil
}

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

// composeService checks one service and converts what troupe runs of it.
func composeService(taskDir, file string, sc types.ServiceConfig) (Service, []string, error) {
	name := sc.Name
	main := name == MainService
	where := func(key string) string { return fmt.Sprintf("%s: services.%s.%s", file, name, key) }
	var errs []error
	var warnings []string
	keys, err := setKeys(sc)
	if err != nil {
		return Service{}, nil, fmt.Errorf("%s: services.%s: %w", file, name, err)
	}
	for _, k := range keys {
		switch {
		case slices.Contains(serviceHonoured, k), !main && slices.Contains(sidecarHonoured, k):
		case k == "networks" && len(sc.Networks) == 1 && sc.Networks["default"] == nil:
			// the loader's own default network
		case k == "volumes":
			for _, v := range sc.Volumes {
				if main && strings.HasPrefix(v.Source, hostLogs) {
					continue // Harbor's log mounts: troupe copies logs out
				}
				errs = append(errs, fmt.Errorf("%s: %s %s:%s: not supported: a trial gets no host folder and no volume", where("volumes"), v.Type, v.Source, v.Target))
			}
		case main && (k == "command" || k == "entrypoint") && !idles(sc.Entrypoint, sc.Command):
			warnings = append(warnings, fmt.Sprintf("%s: not run: the trial container's first process is troupe init, and what runs beside the agents is swept before the verifier; put setup in the Dockerfile, or a server in a service of its own", where(k)))
		case serviceIgnored[k] != "":
			if !main || !harborTemplate(k) {
				warnings = append(warnings, fmt.Sprintf("%s: ignored: %s", where(k), serviceIgnored[k]))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: not supported: troupe gives no service the host's devices, namespaces, privileges or files", where(k)))
		}
	}
	if sc.GetScale() > 1 {
		errs = append(errs, fmt.Errorf("%s: more than one replica is not supported", where("deploy")))
	}
	s := Service{Name: name, Image: sc.Image, Entrypoint: sc.Entrypoint, Command: sc.Command, WorkDir: sc.WorkingDir, User: sc.User}
	if main {
		s.Entrypoint, s.Command, s.WorkDir, s.User = nil, nil, "", ""
	} else {
		// The older keys or deploy.resources.limits: compose's loader
		// refuses the two with different values.
		s.CPUs, s.MemoryMB, s.Pids = float64(sc.CPUS), int64(sc.MemLimit)>>20, sc.PidsLimit
		if d := sc.Deploy; d != nil && d.Resources.Limits != nil {
			l := d.Resources.Limits
			s.CPUs = cmp.Or(float64(l.NanoCPUs), s.CPUs)
			s.MemoryMB = cmp.Or(int64(l.MemoryBytes)>>20, s.MemoryMB)
			s.Pids = cmp.Or(l.Pids, s.Pids)
		}
	}
	if b := sc.Build; b != nil {
		if len(b.Args) > 0 || b.Target != "" || len(b.AdditionalContexts) > 0 || b.DockerfileInline != "" {
			errs = append(errs, fmt.Errorf("%s: build args, targets, inline Dockerfiles and extra contexts are not supported yet", where("build")))
		}
		rel, err := filepath.Rel(taskDir, b.Context)
		if err != nil || !filepath.IsLocal(rel) && rel != "." {
			errs = append(errs, fmt.Errorf("%s: context %s is outside the task's folder", where("build"), b.Context))
		}
		s.BuildDir, s.Image = b.Context, ""
		if b.Dockerfile != "" && b.Dockerfile != "Dockerfile" {
			s.Dockerfile = b.Dockerfile
			if !filepath.IsLocal(b.Dockerfile) {
				errs = append(errs, fmt.Errorf("%s: dockerfile %s must be a file inside the context", where("build"), b.Dockerfile))
			}
		}
	}
	if s.Image == "" && s.BuildDir == "" {
		errs = append(errs, fmt.Errorf("%s: a service needs an image or a build", where("image")))
	}
	if len(sc.Environment) > 0 {
		s.Env = map[string]string{}
		for k, v := range sc.Environment {
			if v != nil {
				s.Env[k] = *v
			}
		}
	}
	if hc := sc.HealthCheck; hc != nil && !main && !hc.Disable {
		h := &runtime.Healthcheck{Test: hc.Test, Interval: dur(hc.Interval), Timeout: dur(hc.Timeout), StartPeriod: dur(hc.StartPeriod)}
		if hc.Retries != nil {
			h.Retries = int(*hc.Retries)
		}
		s.Healthcheck = h
	}
	for _, dep := range slices.Sorted(maps.Keys(sc.DependsOn)) {
		cond := sc.DependsOn[dep].Condition
		switch cond {
		case "", runtime.DependStarted, runtime.DependHealthy, runtime.DependCompleted:
		default:
			errs = append(errs, fmt.Errorf("%s: %s: condition %q is not %s, %s or %s", where("depends_on"), dep, cond, runtime.DependStarted, runtime.DependHealthy, runtime.DependCompleted))
		}
		if dep == MainService {
			errs = append(errs, fmt.Errorf("%s: no service may depend on %s: it starts last", where("depends_on"), MainService))
		}
		s.DependsOn = append(s.DependsOn, runtime.Dependency{Service: dep, Condition: cmpOr(cond, runtime.DependStarted)})
	}
	return s, warnings, errors.Join(errs...)
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

// startOrder orders services so that each comes after its dependencies,
// by name where they do not say; a cycle or a missing service is an error.
func startOrder(file string, services []Service) ([]Service, error) {
	byName := map[string]Service{}
	for _, s := range services {
		byName[s.Name] = s
	}
	var out []Service
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		switch state[name] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("%s: depends_on has a cycle: %s", file, strings.Join(append(path, name), " -> "))
		}
		s, ok := byName[name]
		if !ok {
			return fmt.Errorf("%s: services.%s.depends_on: %q is not a service of the file", file, path[len(path)-1], name)
		}
		state[name] = 1
		for _, d := range s.DependsOn {
			if err := visit(d.Service, append(path, name)); err != nil {
				return err
			}
		}
		state[name] = 2
		out = append(out, s)
		return nil
	}
	for _, s := range services {
		if err := visit(s.Name, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// plainVar is ${NAME} without a default.
var plainVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func unsetWarning(file, name string) string {
	return fmt.Sprintf("%s: ${%s} is not set (not one of Harbor's compose variables, the task's env, or the host's): it is empty", file, name)
}

// maxComposeFile bounds the compose file and every file it reads.
const maxComposeFile = 1 << 20

// inTask reads the files a compose file names, refusing any outside the
// task's folder (a link out included) or that is not a regular file: a
// compose file may not read the host's files, or hang the loader on a
// device. It is the loader's only ResourceLoader: included and extended
// files are found from environment/.
type inTask struct {
	dir    *taskfs.Dir
	envDir string
}

// rel is p (relative to environment/, or absolute) as a path of the task's
// folder, or an error when it is not inside it.
func (l inTask) rel(p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(l.envDir, p)
	}
	rel, err := filepath.Rel(l.dir.Path(), p)
	if err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s is outside the task's folder: a compose file reads the task's files only", p)
	}
	return filepath.ToSlash(rel), nil
}

// path resolves p (relative to environment/) beneath the task's folder
// and checks it: the real file, for compose's loader to read.
func (l inTask) path(p string) (string, error) {
	rel, err := l.rel(p)
	if err != nil {
		return "", err
	}
	info, err := l.dir.Stat(rel)
	switch {
	case err != nil:
		return "", err
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file", p)
	case info.Size() > maxComposeFile:
		return "", fmt.Errorf("%s is larger than %d bytes", p, maxComposeFile)
	}
	return l.dir.Host(rel)
}

func (l inTask) read(p string) ([]byte, error) {
	rel, err := l.rel(p)
	if err != nil {
		return nil, err
	}
	return l.dir.ReadFile(rel, maxComposeFile)
}

// Accept takes every reference: none is fetched from elsewhere.
func (l inTask) Accept(string) bool { return true }

// Load checks a file an include or an extends names.
func (l inTask) Load(_ context.Context, p string) (string, error) {
	if strings.Contains(p, "://") || strings.HasPrefix(p, "git@") || strings.HasPrefix(p, "oci:") {
		return "", fmt.Errorf("%s: remote compose files are not supported: give the file in the task's folder", p)
	}
	return l.path(p)
}

// Dir is the folder of a file, relative to environment/.
func (l inTask) Dir(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(l.envDir, p)
	}
	if info, err := os.Stat(p); err != nil || !info.IsDir() {
		p = filepath.Dir(p)
	}
	if rel, err := filepath.Rel(l.envDir, p); err == nil {
		return rel
	}
	return p
}

// environment is a service's environment as compose makes it: its env
// files (from the task's folder), then its environment table; a name
// without a value takes the compose variables' (Harbor's and the task's).
func (l inTask) environment(sc types.ServiceConfig, vars map[string]string) (types.MappingWithEquals, error) {
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	env := types.MappingWithEquals{}
	for _, f := range sc.EnvFiles {
		data, err := l.read(f.Path)
		if errors.Is(err, fs.ErrNotExist) && !bool(f.Required) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("env_file: %w", err)
		}
		got := map[string]string{}
		if err := dotenv.ParseWithFormat(bytes.NewReader(data), f.Path, got, lookup, f.Format); err != nil {
			return nil, fmt.Errorf("env_file %s: %w", f.Path, err)
		}
		for k, v := range got {
			env[k] = &v
		}
	}
	for k, v := range sc.Environment {
		if v == nil {
			if got, ok := vars[k]; ok {
				v = &got
			}
		}
		env[k] = v
	}
	return env, nil
}
