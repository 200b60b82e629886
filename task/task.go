package task

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/task/taskfs"
)

// Default phase timeouts, Harbor's where Harbor has one. Harbor's agents
// have no time limit by default (schema 1.1 on); a trial needs one.
const (
	DefaultAgentTimeout    = 30 * time.Minute
	DefaultVerifierTimeout = 600 * time.Second
	DefaultBuildTimeout    = 600 * time.Second
	maxInstructionBytes    = 1 << 20
	maxTaskTOMLBytes       = 1 << 20
)

// Task is one benchmark task in Harbor's format: task.toml, instruction.md,
// environment/ (a Dockerfile) or a docker_image, and tests/test.sh, which
// writes /logs/verifier/reward.txt or reward.json. docs/run.md lists every
// key of task.toml and what troupe does with it.
type Task struct {
	// Name is the task folder's name; it names trial folders.
	Name string
	Dir  string
	// ID is [task] name, Harbor's org/name of the task; "" without one.
	ID string
	// Digest is "sha256:<hex>" of the whole folder, for the job's lock file.
	Digest      string
	Instruction string
	// Image is task.toml's docker_image; EnvDir is environment/ when it holds
	// a Dockerfile. At least one is set.
	Image  string
	EnvDir string
	// TestsDir is tests/, copied to /tests for the verifier.
	TestsDir string
	// Compose is environment/docker-compose.yaml when there is one: its main
	// service is the trial container, its other services sidecars.
	Compose *Compose
	// SolutionDir is solution/ when it holds solve.sh, for the oracle;
	// "" otherwise.
	SolutionDir string
	// solutionEnv is [solution] env, resolved only when the oracle runs
	// (SolutionEnv), as in Harbor: a host variable it names is not needed
	// otherwise.
	solutionEnv map[string]any
	solutionAt  field

	AgentTimeout, VerifierTimeout, BuildTimeout time.Duration
	// VerifierEnv is [verifier].env, given to the verifier only.
	VerifierEnv map[string]string
	// Env is [environment].env, resolved: every process of the trial's
	// container sees it.
	Env map[string]string
	// FromHost holds the values [environment] env and [verifier] env took
	// from the host (${VAR}), by variable: a job refuses a real API key
	// among them, and a trial scrubs them from its files like its own
	// secrets.
	FromHost map[string]secret.Secret

	CPUs      float64
	MemoryMB  int64
	StorageMB int64
	// AgentNetwork is what the agents (and the healthcheck) may reach;
	// VerifierNetwork what tests/test.sh may reach. Harbor's default is
	// the internet; [agent] and [verifier] override [environment].
	AgentNetwork, VerifierNetwork Network

	// AgentUser and VerifierUser are [agent] user and [verifier] user: a
	// name or a uid of the image, "" for its default.
	AgentUser, VerifierUser string
	// Workdir is [environment] workdir: the folder every command starts in
	// instead of the image's WORKDIR; "" keeps it.
	Workdir string
	// Healthcheck runs before the agents start; nil when there is none.
	Healthcheck *Healthcheck
	// Artifacts are the paths collected into the trial's artifacts/ after
	// the verifier, beside /logs/artifacts.
	Artifacts []Artifact
	// MCPServers, SkillsDir and GPUTypes are for agent stacks that take
	// them; troupe's reference agent takes none.
	MCPServers []MCPServer
	SkillsDir  string
	GPUTypes   []string
	// SchemaVersion and Source are recorded, as Harbor does.
	SchemaVersion, Source string

	// Warnings are located notes about keys Harbor does not define: the
	// task runs without them (a strict load refuses them).
	Warnings []string
}

// NetworkMode is Harbor's network_mode.
type NetworkMode string

// Harbor's network modes.
const (
	Public    NetworkMode = "public"
	NoNetwork NetworkMode = "no-network"
	Allowlist NetworkMode = "allowlist"
)

// Network is one phase's network: its mode and, for an allowlist, the
// hosts it may reach (lower case; "*.example.com" matches its subdomains).
type Network struct {
	Mode         NetworkMode `json:"mode"`
	AllowedHosts []string    `json:"allowed_hosts,omitempty"`
}

// Healthcheck is [environment.healthcheck], run as Harbor does: the command
// passes at its first success; failures during the start period do not
// count; after it, Retries failures in a row fail the trial.
type Healthcheck struct {
	Command                                       string
	Interval, Timeout, StartPeriod, StartInterval time.Duration
	Retries                                       int
}

// Artifact is a path in the container collected after the verifier into
// the trial's artifacts/<Destination>.
type Artifact struct {
	Source, Destination string
	Exclude             []string
}

// MCPServer is an entry of [[environment.mcp_servers]].
type MCPServer struct {
	Name, Transport, URL, Command string
	Args                          []string
}

// Options change how tasks are read.
type Options struct {
	// Strict turns warnings (keys Harbor does not define) into errors.
	Strict bool
	// Getenv reads the host's environment for ${VAR} values of
	// [environment] env and [verifier] env; nil is os.Getenv.
	Getenv func(string) string
}

// Load reads and checks a task folder. Every problem is reported, each
// naming its file (and line, in task.toml), before any container starts.
func Load(dir string, opts Options) (*Task, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", dir, err)
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	t := &Task{Name: filepath.Base(abs), Dir: abs, AgentTimeout: DefaultAgentTimeout, VerifierTimeout: DefaultVerifierTimeout, BuildTimeout: DefaultBuildTimeout}
	var errs []error
	problem := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// Every file of the task is read through d: none through a link that
	// leaves the folder (a chain of links each inside it can lead out).
	d, err := taskfs.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w (a Harbor task folder holds task.toml, instruction.md, environment/ and tests/test.sh)", dir, err)
	}
	defer d.Close()
	tomlPath := filepath.Join(abs, "task.toml")
	data, err := d.ReadFile("task.toml", maxTaskTOMLBytes)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w (a Harbor task folder holds task.toml, instruction.md, environment/ and tests/test.sh)", dir, err)
	}
	tf, warnings, err := parseFile(tomlPath, data)
	if err != nil {
		// Nothing else about task.toml can be said: it was not read.
		errs = append(errs, err)
	} else {
		p := &problems{}
		t.Warnings = append(warnings, t.apply(tf, newLocator(tomlPath, data), p, opts)...)
		errs = append(errs, p.errs...)
		if opts.Strict {
			for _, w := range t.Warnings {
				problem("%s (refused: --strict)", w)
			}
		}
	}
	// A link out of the folder is refused wherever it is, used or not:
	// the build context, the compose files, tests/ and solution/ are all
	// read from here, some of them by other processes.
	if err := d.CheckLinks("."); err != nil {
		errs = append(errs, err)
	}

	multiStep := tf != nil && len(tf.Steps) > 0 // refused above; its parts are elsewhere
	instruction, err := d.ReadFile("instruction.md", maxInstructionBytes)
	switch {
	case multiStep:
	case errors.Is(err, taskfs.ErrOutside):
		// CheckLinks said it.
	case err != nil:
		problem("%s: %w", filepath.Join(abs, "instruction.md"), err)
	case len(bytes.TrimSpace(instruction)) == 0:
		problem("%s: the instruction is empty", filepath.Join(abs, "instruction.md"))
	}
	t.Instruction = string(instruction)

	// The folders other code reads are given as the real folders they
	// lead to, every link resolved inside the task.
	host := func(name string) string {
		if p, err := d.Host(name); err == nil {
			return p
		}
		return filepath.Join(abs, name)
	}
	envDir := host("environment")
	compose := d.IsFile("environment/" + ComposeFile)
	switch {
	case d.IsFile("environment/Dockerfile"):
		t.EnvDir = envDir
	case tf == nil:
		// Whether task.toml names an image is not known.
	case t.Image == "" && !compose:
		problem("%s: no environment/Dockerfile, docker-compose.yaml or [environment] docker_image: the task has no container to run in", abs)
	}
	if tf != nil && compose {
		// Harbor prefers the compose file when there is one.
		c, warnings, err := t.loadCompose(d, envDir, opts.Getenv)
		t.Warnings = append(t.Warnings, warnings...)
		switch {
		case err != nil:
			errs = append(errs, err)
		case c.Main.Name == "":
			problem("%s: no service %q: it is the trial container (give it an image or a build, or give the task environment/Dockerfile)", c.File, MainService)
		default:
			t.Compose = c
		}
	}
	if d.IsFile("solution/solve.sh") {
		t.SolutionDir = host("solution")
	}
	t.TestsDir = host("tests")
	if !multiStep && !d.IsFile("tests/test.sh") {
		problem("%s: tests/test.sh is missing: it is the verifier, writing /logs/verifier/reward.txt or reward.json", abs)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("task %s is not valid:\n%w", dir, err)
	}
	digest, err := taskfs.Digest(abs)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", dir, err)
	}
	t.Digest = "sha256:" + digest
	return t, nil
}

// orgName is the form of [task] name Harbor requires.
var orgName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$`)

// apply takes task.toml's values into the task, recording problems (what
// Harbor refuses too, or what troupe cannot run yet) and returning
// warnings.
func (t *Task) apply(tf *taskFile, at locator, p *problems, opts Options) (warnings []string) {
	// Top level.
	schema := tf.SchemaVersion
	if schema == nil {
		schema = tf.Version // the older name; schema_version wins
	}
	t.SchemaVersion, _ = p.asString(at.at("", "schema_version"), schema)
	t.Source, _ = p.asString(at.at("", "source"), tf.Source)
	if len(tf.Steps) > 0 || tf.MultiStep != nil {
		p.add(at.at("", "steps"), "multi-step tasks are not supported yet: troupe runs a task's single instruction")
	}
	for i, a := range tf.Artifacts {
		f := at.at("", "artifacts")
		switch a := a.(type) {
		case string:
			t.Artifacts = append(t.Artifacts, Artifact{Source: a})
		case map[string]any:
			warnings = append(warnings, knownIn(at, "artifacts", a, "source", "destination", "exclude")...)
			var art Artifact
			art.Source, _ = p.asString(f, a["source"])
			art.Destination, _ = p.asString(f, a["destination"])
			if ex, ok := a["exclude"]; ok {
				art.Exclude, _ = p.asStrings(f, ex)
			}
			t.Artifacts = append(t.Artifacts, art)
		default:
			p.add(f, "entry %d must be a path or a table {source, destination, exclude}, found %v", i+1, a)
		}
	}
	for i, a := range t.Artifacts {
		f := at.at("", "artifacts")
		switch {
		case !path.IsAbs(a.Source):
			p.add(f, "entry %d: source %q must be an absolute path in the container", i+1, a.Source)
		case a.Destination != "" && (path.IsAbs(a.Destination) || !fs.ValidPath(path.Clean(a.Destination))):
			p.add(f, "entry %d: destination %q must be a relative path inside artifacts/", i+1, a.Destination)
		}
	}
	if tf.Task != nil {
		f := at.at("task", "name")
		warnings = append(warnings, knownIn(at, "task", tf.Task, "name", "description", "authors", "keywords", "version")...)
		name, ok := p.asString(f, tf.Task["name"])
		switch {
		case !ok:
		case !orgName.MatchString(name) || strings.Contains(name, ".."):
			p.add(f, "%q must be in org/name form (letters, digits, '.', '_' and '-'), as Harbor requires", name)
		default:
			t.ID = name
		}
	}

	// [agent] and [verifier].
	seconds := func(f field, v any, into *time.Duration) {
		if v == nil {
			return
		}
		if x, ok := p.asFloat(f, v); ok {
			if x <= 0 || x > 7*24*3600 {
				p.add(f, "must be a number of seconds above 0 (at most a week), found %v", x)
				return
			}
			*into = time.Duration(x * float64(time.Second))
		}
	}
	seconds(at.at("agent", "timeout_sec"), tf.Agent.TimeoutSec, &t.AgentTimeout)
	seconds(at.at("verifier", "timeout_sec"), tf.Verifier.TimeoutSec, &t.VerifierTimeout)
	t.AgentUser = p.asUser(at.at("agent", "user"), tf.Agent.User)
	t.VerifierUser = p.asUser(at.at("verifier", "user"), tf.Verifier.User)
	t.VerifierEnv = t.resolveEnv(at.at("verifier", "env"), tf.Verifier.Env, p, opts.Getenv)
	if m, ok := p.asString(at.at("verifier", "environment_mode"), tf.Verifier.EnvironmentMode); ok && m != "" && m != "shared" || tf.Verifier.Environment != nil {
		p.add(at.at("verifier", "environment_mode"), "a separate verifier environment is not supported yet: the verifier runs in the agents' container (\"shared\")")
	}
	if len(tf.Verifier.Collect) > 0 {
		p.add(at.at("verifier", "collect"), "[[verifier.collect]] is not supported yet")
	}

	// [environment].
	env := tf.Environment
	t.Image, _ = p.asString(at.at("environment", "docker_image"), env.DockerImage)
	t.Image = strings.TrimSpace(t.Image)
	seconds(at.at("environment", "build_timeout_sec"), env.BuildTimeoutSec, &t.BuildTimeout)
	if env.CPUs != nil {
		f := at.at("environment", "cpus")
		if x, ok := p.asFloat(f, env.CPUs); ok {
			if x <= 0 {
				p.add(f, "must be above 0, found %v", x)
			}
			t.CPUs = x
		}
	}
	t.MemoryMB = t.size(at, p, "memory", env.MemoryMB, env.Memory)
	t.StorageMB = t.size(at, p, "storage", env.StorageMB, env.Storage)
	if env.GPUs != nil {
		if n, ok := p.asInt(at.at("environment", "gpus"), env.GPUs); ok && n > 0 {
			p.add(at.at("environment", "gpus"), "%d: troupe does not give trials GPUs", n)
		}
	}
	if env.GPUTypes != nil {
		t.GPUTypes, _ = p.asStrings(at.at("environment", "gpu_types"), env.GPUTypes)
	}
	t.AgentNetwork, t.VerifierNetwork = network(at, p, tf)
	for _, m := range env.MCPServers {
		f := at.at("environment", "mcp_servers")
		warnings = append(warnings, knownIn(at, "environment.mcp_servers", m, "name", "transport", "url", "command", "args")...)
		var s MCPServer
		s.Name, _ = p.asString(f, m["name"])
		s.Transport, _ = p.asString(f, m["transport"])
		s.URL, _ = p.asString(f, m["url"])
		s.Command, _ = p.asString(f, m["command"])
		if a, ok := m["args"]; ok {
			s.Args, _ = p.asStrings(f, a)
		}
		s.Transport = cmp.Or(s.Transport, "sse")
		if s.Transport == "http" {
			s.Transport = "streamable-http"
		}
		switch {
		case s.Name == "":
			p.add(f, "every MCP server needs a name")
		case !slices.Contains([]string{"stdio", "sse", "streamable-http"}, s.Transport):
			p.add(f, "server %s: transport %q is not stdio, sse or streamable-http", s.Name, s.Transport)
		case s.Transport == "stdio" && s.Command == "":
			p.add(f, "server %s: a stdio server needs a command", s.Name)
		case s.Transport != "stdio" && s.URL == "":
			p.add(f, "server %s: an %s server needs a url", s.Name, s.Transport)
		}
		t.MCPServers = append(t.MCPServers, s)
	}
	t.Env = t.resolveEnv(at.at("environment", "env"), env.Env, p, opts.Getenv)
	t.SkillsDir, _ = p.asString(at.at("environment", "skills_dir"), env.SkillsDir)
	workdir, _ := p.asString(at.at("environment", "workdir"), env.Workdir)
	if workdir != "" && !path.IsAbs(workdir) {
		p.add(at.at("environment", "workdir"), "%q must be an absolute path", workdir)
	}
	t.Workdir = workdir
	if env.Healthcheck != nil {
		t.Healthcheck = healthcheck(at, p, env.Healthcheck)
		warnings = append(warnings, knownIn(at, "environment.healthcheck", env.Healthcheck,
			"command", "interval_sec", "timeout_sec", "start_period_sec", "start_interval_sec", "retries")...)
	}
	if osName, ok := p.asString(at.at("environment", "os"), env.OS); ok && osName != "" && !strings.EqualFold(osName, "linux") {
		p.add(at.at("environment", "os"), "%q: troupe runs Linux containers only", osName)
	}
	if env.TPU != nil {
		p.add(at.at("environment", "tpu"), "troupe does not give trials TPUs")
	}
	// [solution] env is the oracle's, resolved when it runs, as in Harbor.
	for _, k := range slices.Sorted(maps.Keys(tf.Solution.Env)) {
		if v, ok := p.asString(at.at("solution", "env"), tf.Solution.Env[k]); ok {
			if t.solutionEnv == nil {
				t.solutionEnv = map[string]any{}
			}
			t.solutionEnv[k] = v
		}
	}
	t.solutionAt = at.at("solution", "env")
	return warnings
}

// size reads memory_mb (MiB) or its older spelling memory ("2G"); both may
// be given only with the same value, as Harbor 1.3 requires.
func (t *Task) size(at locator, p *problems, name string, mb, old any) int64 {
	var n int64
	ok := true
	if mb != nil {
		n, ok = p.asInt(at.at("environment", name+"_mb"), mb)
	}
	if old != nil {
		f := at.at("environment", name)
		if m, okOld := p.sizeMB(f, old); okOld {
			if mb != nil && ok && m != n {
				p.add(f, "%q is %d MiB but %s_mb says %d: give one of them", old, m, name, n)
			}
			n, ok = m, ok && okOld
		}
	}
	if ok && (mb != nil || old != nil) && n <= 0 {
		p.add(at.at("environment", name+"_mb"), "must be above 0 MiB, found %d", n)
	}
	return n
}

// network reads Harbor's network policy (schema 1.3: network_mode public,
// no-network or allowlist, with allowed_hosts; allow_internet, the older
// switch, when no mode is set) for the agents' phase and the verifier's:
// each takes its own table's mode, else the environment's, else the
// internet, as in Harbor.
func network(at locator, p *problems, tf *taskFile) (agents, verifier Network) {
	env := tf.Environment
	mode, _ := p.asString(at.at("environment", "network_mode"), env.NetworkMode)
	if mode == "" && env.AllowedHosts == nil && env.AllowInternet != nil {
		if allow, ok := p.asBool(at.at("environment", "allow_internet"), env.AllowInternet); ok && !allow {
			mode = string(NoNetwork)
		}
	}
	base := policy(at, p, "environment", mode, env.AllowedHosts)
	if base.Mode == "" {
		base.Mode = Public
	}
	phase := func(table string, mode, hosts any) Network {
		m, _ := p.asString(at.at(table, "network_mode"), mode)
		if m == "" && hosts == nil {
			return base
		}
		n := policy(at, p, table, m, hosts)
		if n.Mode == "" {
			return base
		}
		return n
	}
	return phase("agent", tf.Agent.NetworkMode, tf.Agent.AllowedHosts), phase("verifier", tf.Verifier.NetworkMode, tf.Verifier.AllowedHosts)
}

// policy checks one table's network_mode and allowed_hosts as Harbor does,
// and returns them (Mode "" when none is set).
func policy(at locator, p *problems, table, mode string, hosts any) Network {
	f := at.at(table, "network_mode")
	switch NetworkMode(mode) {
	case "", Public, NoNetwork, Allowlist:
	default:
		p.add(f, "%q is not public, no-network or allowlist", mode)
		return Network{}
	}
	n := Network{Mode: NetworkMode(mode)}
	if hosts == nil {
		if n.Mode == Allowlist {
			p.add(f, "\"allowlist\" needs allowed_hosts: the hosts the trial may reach")
		}
		return n
	}
	hf := at.at(table, "allowed_hosts")
	list, ok := p.asStrings(hf, hosts)
	switch {
	case !ok:
	case n.Mode != Allowlist:
		// Harbor refuses it too: hosts alone would otherwise silently mean
		// either everything or nothing.
		p.add(hf, "is only valid with network_mode = \"allowlist\" (Harbor refuses it otherwise too); add network_mode = \"allowlist\" to this table")
	case len(list) == 0:
		p.add(hf, "must name at least one host with network_mode = \"allowlist\"")
	}
	for _, h := range list {
		if err := checkHost(h); err != nil {
			p.add(hf, "%q: %v", h, err)
			continue
		}
		n.AllowedHosts = append(n.AllowedHosts, strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), "."))
	}
	return n
}

var hostLabel = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)

// checkHost accepts a host name, optionally with a leading "*." wildcard, as
// Harbor does; no scheme, port or path.
func checkHost(h string) error {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	if h == "" || strings.ContainsAny(h, "/:") {
		return errors.New("give a host name, without a scheme, port or path")
	}
	h = strings.TrimPrefix(h, "*.")
	for _, label := range strings.Split(h, ".") {
		if !hostLabel.MatchString(label) {
			return fmt.Errorf("%q is not a host name label", label)
		}
	}
	return nil
}

// healthcheck reads [environment.healthcheck] with Harbor's defaults.
func healthcheck(at locator, p *problems, m map[string]any) *Healthcheck {
	hc := &Healthcheck{Interval: 5 * time.Second, Timeout: 30 * time.Second, StartInterval: 5 * time.Second, Retries: 3}
	f := func(key string) field { return at.at("environment.healthcheck", key) }
	cmdv, ok := m["command"]
	if !ok {
		p.add(f("command"), "is required: a shell command, exit 0 meaning healthy")
	}
	hc.Command, _ = p.asString(f("command"), cmdv)
	for key, into := range map[string]*time.Duration{"interval_sec": &hc.Interval, "timeout_sec": &hc.Timeout, "start_period_sec": &hc.StartPeriod, "start_interval_sec": &hc.StartInterval} {
		if v, ok := m[key]; ok {
			if x, ok := p.asFloat(f(key), v); ok {
				if x < 0 || x > 24*3600 {
					p.add(f(key), "must be between 0 and a day, found %v", x)
					continue
				}
				*into = time.Duration(x * float64(time.Second))
			}
		}
	}
	if v, ok := m["retries"]; ok {
		if n, ok := p.asInt(f("retries"), v); ok {
			if n < 1 || n > 1000 {
				p.add(f("retries"), "must be between 1 and 1000, found %d", n)
			}
			hc.Retries = int(n)
		}
	}
	return hc
}

// envRef is a value Harbor takes from the host: ${VAR} or ${VAR:-default},
// the whole value.
var envRef = regexp.MustCompile(`^\$\{([^}:]+)(?::-(.*))?\}$`)

// resolveEnv reads an env table: string values, ${VAR} taken from the host
// (a missing one is an error, as in Harbor), ${VAR:-default} with its
// default. What comes from the host is kept in FromHost.
func (t *Task) resolveEnv(f field, m map[string]any, p *problems, getenv func(string) string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, ok := m[k].(string)
		if !ok {
			p.add(f, "%s must be a string, found %v", k, m[k])
			continue
		}
		if ref := envRef.FindStringSubmatch(v); ref != nil {
			name, def := ref[1], ref[2]
			got := getenv(name)
			switch {
			case got != "":
				v = got
			case strings.Contains(v, ":-"):
				v = def
			default:
				p.add(f, "%s takes ${%s} from the host, which does not set it: export it, or give ${%s:-default}", k, name, name)
				continue
			}
			if got != "" {
				if t.FromHost == nil {
					t.FromHost = map[string]secret.Secret{}
				}
				t.FromHost[name] = secret.New(got)
			}
		}
		out[k] = v
	}
	return out
}

// SolutionEnv resolves [solution] env for the oracle, taking ${VAR} values
// from getenv (nil: the process's environment); fromHost holds the values
// taken from the host, by variable, to be scrubbed like FromHost. The task
// is not changed: trials of it may run at once.
func (t *Task) SolutionEnv(getenv func(string) string) (env map[string]string, fromHost map[string]secret.Secret, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var p problems
	var scratch Task
	env = scratch.resolveEnv(t.solutionAt, t.solutionEnv, &p, getenv)
	if err := errors.Join(p.errs...); err != nil {
		return nil, nil, fmt.Errorf("task %s: %w", t.Dir, err)
	}
	return env, scratch.FromHost, nil
}

// Dirs lists the task folders of each path: a task folder (with
// task.toml), or a folder of task folders (a dataset), in order.
func Dirs(paths []string) ([]string, error) {
	var dirs []string
	var errs []error
	for _, p := range paths {
		if isFile(filepath.Join(p, "task.toml")) {
			dirs = append(dirs, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("tasks %s: %w", p, err))
			continue
		}
		found := 0
		for _, e := range entries {
			if e.IsDir() && isFile(filepath.Join(p, e.Name(), "task.toml")) {
				found++
				dirs = append(dirs, filepath.Join(p, e.Name()))
			}
		}
		if found == 0 {
			errs = append(errs, fmt.Errorf("tasks %s: neither a task (no task.toml) nor a folder of tasks", p))
		}
	}
	return dirs, errors.Join(errs...)
}

// Find reads the tasks of each path (Dirs). Names must be unique: they name
// the trial folders.
func Find(paths []string, opts Options) ([]*Task, error) {
	dirs, err := Dirs(paths)
	errs := []error{err}
	var tasks []*Task
	for _, d := range dirs {
		t, err := Load(d, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tasks = append(tasks, t)
	}
	seen := map[string]string{}
	for _, t := range tasks {
		if other, dup := seen[t.Name]; dup {
			errs = append(errs, fmt.Errorf("two tasks are named %s (%s and %s): task folder names must be unique in a job", t.Name, other, t.Dir))
		}
		seen[t.Name] = t.Dir
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return nil, errors.New("no tasks: give --tasks a task folder or a folder of tasks")
	}
	return tasks, nil
}

func isFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}
