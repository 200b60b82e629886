package task

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/troupebench/troupe/internal/located"
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
	// HostMounts are the host paths the service binds (volumes): mounted
	// only where the user allows them (HostMount).
	HostMounts []HostMount
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
// errors; what troupe leaves out of a service is a warning. Both are
// located in the compose file, at the service and key they are about
// (compose's loader gives no lines).
func (t *Task) loadCompose(d *taskfs.Dir, envDir string, getenv func(string) string) (*Compose, []*located.Error, error) {
	file := filepath.Join(envDir, ComposeFile)
	vars := t.composeVars(envDir)
	lookup := t.composeLookup(vars, getenv)
	files := inTask{dir: d, envDir: envDir}
	content, err := files.read(file)
	if err != nil {
		return nil, nil, err
	}
	project, err := t.composeProject(files, file, content, vars, lookup)
	if err != nil {
		return nil, nil, err
	}
	c := &Compose{File: file}
	warnings, errs := c.addServices(d.Path(), project)
	for _, key := range []string{"volumes", "secrets", "configs", "models"} {
		if n := map[string]int{"volumes": len(project.Volumes), "secrets": len(project.Secrets), "configs": len(project.Configs), "models": len(project.Models)}[key]; n > 0 {
			errs = append(errs, &located.Error{File: file, Err: fmt.Errorf("top-level %s: not supported (trials have no state or host files beyond the task's image)", key)})
		}
	}
	if len(project.Networks) > 1 || len(project.Networks) == 1 && project.Networks["default"].Name == "" {
		warnings = append(warnings, &located.Error{File: file, Err: errors.New("top-level networks: ignored: every service is on the trial's own network")})
	}
	warnings = append(warnings, unsetVars(file, content, lookup)...)
	if len(errs) > 0 {
		return nil, warnings, located.List(errs)
	}
	c.Sidecars, err = startOrder(file, c.Sidecars)
	if err != nil {
		return nil, warnings, err
	}
	for _, d := range c.Main.DependsOn {
		if !slices.ContainsFunc(c.Sidecars, func(s Service) bool { return s.Name == d.Service }) {
			return nil, warnings, notAService(file, MainService, d.Service)
		}
	}
	return c, warnings, nil
}

// composeLookup is how the compose file's variables are found: Harbor's
// and the task's env, else the host's (Harbor passes its whole
// environment); a value taken from the host is scrubbed like
// [environment] env's.
func (t *Task) composeLookup(vars map[string]string, getenv func(string) string) func(string) (string, bool) {
	return func(key string) (string, bool) {
		if v, ok := vars[key]; ok {
			return v, true
		}
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
}

// composeProject loads the compose file with the Compose specification's
// own loader, over a base file that gives the main service the task's
// build or image, and gives each service its environment.
func (t *Task) composeProject(files inTask, file string, content []byte, vars map[string]string, lookup func(string) (string, bool)) (*types.Project, error) {
	// The main service is built from environment/ or is the task's image
	// unless the file says otherwise, as in Harbor.
	base := "services: {}\n"
	switch {
	case t.EnvDir != "":
		base = fmt.Sprintf("services:\n  %s:\n    build:\n      context: %q\n", MainService, files.envDir)
	case t.Image != "":
		base = fmt.Sprintf("services:\n  %s:\n    image: %q\n", MainService, t.Image)
	}
	details := types.ConfigDetails{
		WorkingDir:  files.envDir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(files.envDir, ".troupe-base.yaml"), Content: []byte(base)}, {Filename: file, Content: content}},
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
		return nil, &located.Error{File: file, Err: err}
	}
	for name, sc := range project.Services {
		env, err := files.environment(sc, vars)
		if err != nil {
			return nil, &located.Error{File: file, Path: "services." + name, Err: err}
		}
		sc.Environment = env
		project.Services[name] = sc
	}
	return project, nil
}

// addServices converts every service, in name order: main is the trial
// container, the others its sidecars. A service with problems is left out.
func (c *Compose) addServices(taskDir string, project *types.Project) (warnings, errs []*located.Error) {
	for _, name := range slices.Sorted(maps.Keys(project.Services)) {
		s, w, problems := composeService(taskDir, c.File, project.Services[name])
		warnings = append(warnings, w...)
		if len(problems) > 0 {
			errs = append(errs, problems...)
			continue
		}
		if name == MainService {
			c.Main = s
		} else {
			c.Sidecars = append(c.Sidecars, s)
		}
	}
	return warnings, errs
}

// unsetVars warns, once each, of a variable the file takes whole that
// neither Harbor's variables, the task's env nor the host set: compose's
// loader would only log it.
func unsetVars(file string, content []byte, lookup func(string) (string, bool)) []*located.Error {
	var out []*located.Error
	seen := map[string]bool{}
	for _, m := range plainVar.FindAllStringSubmatch(string(content), -1) {
		if _, ok := lookup(m[1]); !ok && !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, &located.Error{File: file, Err: fmt.Errorf("${%s} is not set (not one of Harbor's compose variables, the task's env, or the host's): it is empty", m[1])})
		}
	}
	return out
}

// notAService is a depends_on naming a service the file does not have.
func notAService(file, service, dep string) *located.Error {
	return &located.Error{File: file, Path: "services." + service + ".depends_on", Err: fmt.Errorf("%q is not a service of the file", dep)}
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
			return &located.Error{File: file, Err: fmt.Errorf("depends_on has a cycle: %s", strings.Join(append(path, name), " -> "))}
		}
		s, ok := byName[name]
		if !ok {
			return notAService(file, path[len(path)-1], name)
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
