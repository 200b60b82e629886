package task

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/internal/located"
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
	// Services is [metadata.troupe] services: ServicesKeep when the task
	// needs what the agents leave running (a server they were asked to
	// start) to survive into the verifier, ServicesSweep when it must not;
	// "" says nothing (troupe's default: sweep).
	Services string
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
	// Origin is where a task of a registry's dataset came from; nil for a
	// task folder given as such. Load never sets it: troupe run does, for
	// the tasks --dataset fetched.
	Origin *Origin

	// Steps are a multi-step task's [[steps]], in order (steps.go); nil
	// for a task of one instruction. Such a task has no Instruction, and
	// its tests/ and solution/ are shared by its steps.
	Steps []Step
	// RewardStrategy is multi_step_reward_strategy, RewardMean or
	// RewardFinal, for a task with steps; "" otherwise.
	RewardStrategy string

	// Warnings are located notes about keys Harbor does not define: the
	// task runs without them (a strict load refuses them).
	Warnings []string
}

// Origin is where a task of a registry's dataset came from: the dataset
// (Name, Version) in the registry Registry (a URL or a file), and the
// task's repository, pinned commit and path in it.
type Origin struct {
	Name, Version, Registry string
	GitURL, GitCommit, Path string
}

// The values of [metadata.troupe] services.
const (
	ServicesKeep  = "keep"
	ServicesSweep = "sweep"
)

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

// MCPServer is an entry of [[environment.mcp_servers]]: the stack
// contract's form, since it is handed to the agents as it is.
type MCPServer = contract.MCPServer

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

	// Every file of the task is read through d: none through a link that
	// leaves the folder (a chain of links each inside it can lead out).
	d, err := taskfs.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w (a Harbor task folder holds task.toml, instruction.md, environment/ and tests/test.sh)", dir, err)
	}
	defer d.Close()
	data, err := d.ReadFile("task.toml", maxTaskTOMLBytes)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w (a Harbor task folder holds task.toml, instruction.md, environment/ and tests/test.sh)", dir, err)
	}
	r := &folderRead{t: t, d: d, abs: abs}
	tf := r.taskTOML(data, opts.Strict, opts.Getenv)
	// A link out of the folder is refused wherever it is, used or not:
	// the build context, the compose files, tests/ and solution/ are all
	// read from here, some of them by other processes.
	if err := d.CheckLinks("."); err != nil {
		r.errs = append(r.errs, err)
	}
	multiStep := tf != nil && len(tf.Steps) > 0 // its parts are in steps/
	r.instruction(multiStep)
	r.environment(tf, opts.Getenv)
	r.steps()
	if d.IsFile("solution/solve.sh") {
		t.SolutionDir = r.host("solution")
	}
	t.TestsDir = r.host("tests")
	if !multiStep && !d.IsFile("tests/test.sh") {
		r.problem("%s: tests/test.sh is missing: it is the verifier, writing /logs/verifier/reward.txt or reward.json", abs)
	}
	if err := errors.Join(r.errs...); err != nil {
		return nil, fmt.Errorf("task %s is not valid:\n%w", dir, err)
	}
	digest, err := taskfs.Digest(abs)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", dir, err)
	}
	t.Digest = "sha256:" + digest
	return t, nil
}

// folderRead is one Load under way: the task it fills, the folder it reads
// and every problem found so far, in the order found.
type folderRead struct {
	t    *Task
	d    *taskfs.Dir
	abs  string
	errs []error
}

func (r *folderRead) problem(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// taskTOML reads task.toml into the task: its problems are the task's;
// its warnings are the task's warnings, or, strict, problems too. It
// returns the file's values, nil when the file is not TOML.
func (r *folderRead) taskTOML(data []byte, strict bool, getenv func(string) string) *taskFile {
	tf, warnings, errs := r.t.readTOML(filepath.Join(r.abs, "task.toml"), data, getenv)
	for _, e := range errs {
		r.errs = append(r.errs, e)
	}
	r.t.Warnings = lines(warnings)
	if strict {
		for _, w := range warnings {
			r.errs = append(r.errs, &located.Error{File: w.File, Line: w.Line, Col: w.Col, Path: w.Path, Err: fmt.Errorf("%w (refused: --strict)", w.Err)})
		}
	}
	return tf
}

// lines renders warnings as the task keeps them.
func lines(warnings []*located.Error) []string {
	var out []string
	for _, w := range warnings {
		out = append(out, w.Error())
	}
	return out
}

// instruction reads instruction.md; a multi-step task has none of its
// own (Harbor ignores one there): each step has its instruction.
func (r *folderRead) instruction(multiStep bool) {
	if !multiStep {
		r.t.Instruction = r.readInstruction("instruction.md")
	}
}

// readInstruction reads an instruction file of the task, which must say
// something.
func (r *folderRead) readInstruction(name string) string {
	instruction, err := r.d.ReadFile(name, maxInstructionBytes)
	file := filepath.Join(r.abs, filepath.FromSlash(name))
	switch {
	case errors.Is(err, taskfs.ErrOutside):
		// CheckLinks said it.
	case err != nil:
		r.problem("%s: %w", file, err)
	case len(bytes.TrimSpace(instruction)) == 0:
		r.problem("%s: the instruction is empty", file)
	}
	return string(instruction)
}

// host is the real folder a folder of the task leads to, every link
// resolved inside the task: other code reads the folders it is given.
func (r *folderRead) host(name string) string {
	if p, err := r.d.Host(name); err == nil {
		return p
	}
	return filepath.Join(r.abs, name)
}

// environment finds what the task runs in: environment/Dockerfile, the
// compose file, or task.toml's image (tf nil: task.toml was not read).
func (r *folderRead) environment(tf *taskFile, getenv func(string) string) {
	t, d := r.t, r.d
	envDir := r.host("environment")
	compose := d.IsFile("environment/" + ComposeFile)
	switch {
	case d.IsFile("environment/Dockerfile"):
		t.EnvDir = envDir
	case tf == nil:
		// Whether task.toml names an image is not known.
	case t.Image == "" && !compose:
		r.problem("%s: no environment/Dockerfile, docker-compose.yaml or [environment] docker_image: the task has no container to run in", r.abs)
	}
	if tf == nil || !compose {
		return
	}
	// Harbor prefers the compose file when there is one.
	c, warnings, err := t.loadCompose(d, envDir, getenv)
	t.Warnings = append(t.Warnings, lines(warnings)...)
	switch {
	case err != nil:
		r.errs = append(r.errs, err)
	case c.Main.Name == "":
		r.problem("%s: no service %q: it is the trial container (give it an image or a build, or give the task environment/Dockerfile)", c.File, MainService)
	default:
		t.Compose = c
	}
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
