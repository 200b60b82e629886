package task

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/runtime"
)

// Default phase timeouts, Harbor's where Harbor has one.
const (
	DefaultAgentTimeout    = 30 * time.Minute
	DefaultVerifierTimeout = 600 * time.Second
	DefaultBuildTimeout    = 600 * time.Second
	maxInstructionBytes    = 1 << 20
	maxTaskTOMLBytes       = 1 << 20
)

// Task is one benchmark task in Harbor's format: task.toml, instruction.md,
// environment/ (a Dockerfile) or a docker_image, and tests/test.sh, which
// writes /logs/verifier/reward.txt or reward.json.
type Task struct {
	// Name is the task folder's name; it names trial folders.
	Name string
	Dir  string
	// Digest is "sha256:<hex>" of the whole folder, for the job's lock file.
	Digest      string
	Instruction string
	// Image is task.toml's docker_image; EnvDir is environment/ when it holds
	// a Dockerfile. At least one is set.
	Image  string
	EnvDir string
	// TestsDir is tests/, copied to /tests for the verifier.
	TestsDir string

	AgentTimeout, VerifierTimeout, BuildTimeout time.Duration
	// VerifierEnv is [verifier].env, given to the verifier only.
	VerifierEnv map[string]string

	CPUs      float64
	MemoryMB  int64
	StorageMB int64
	// Internet is true when the task asks for a network (network_mode =
	// "public" or allow_internet = true); trials have none by default.
	Internet bool
}

// taskFile is task.toml as Harbor writes it. Keys troupe does not act on
// are accepted when Harbor defines them; anything else is a mistake.
type taskFile struct {
	Version  any            `toml:"version"`
	Task     map[string]any `toml:"task"`
	Metadata map[string]any `toml:"metadata"`
	Agent    struct {
		TimeoutSec  *float64 `toml:"timeout_sec"`
		User        string   `toml:"user"`
		NetworkMode string   `toml:"network_mode"`
	} `toml:"agent"`
	Verifier struct {
		TimeoutSec      *float64          `toml:"timeout_sec"`
		Env             map[string]string `toml:"env"`
		User            string            `toml:"user"`
		EnvironmentMode string            `toml:"environment_mode"`
	} `toml:"verifier"`
	Environment struct {
		DockerImage     string            `toml:"docker_image"`
		BuildTimeoutSec *float64          `toml:"build_timeout_sec"`
		CPUs            *float64          `toml:"cpus"`
		MemoryMB        *int64            `toml:"memory_mb"`
		StorageMB       *int64            `toml:"storage_mb"`
		GPUs            int64             `toml:"gpus"`
		NetworkMode     string            `toml:"network_mode"`
		AllowedHosts    []string          `toml:"allowed_hosts"`
		AllowInternet   *bool             `toml:"allow_internet"`
		Env             map[string]string `toml:"env"`
	} `toml:"environment"`
	Solution map[string]any   `toml:"solution"`
	Steps    []map[string]any `toml:"steps"`
}

// knownKeys are task.toml's keys by table, for "did you mean".
var knownKeys = map[string][]string{
	"":            {"version", "task", "metadata", "agent", "verifier", "environment", "solution", "steps"},
	"agent":       {"timeout_sec", "user", "network_mode"},
	"verifier":    {"timeout_sec", "env", "user", "environment_mode"},
	"environment": {"docker_image", "build_timeout_sec", "cpus", "memory_mb", "storage_mb", "gpus", "network_mode", "allowed_hosts", "allow_internet", "env"},
}

// errDecoderPanic marks a task.toml the TOML library could not survive. It
// is a library bug (go-toml 2.2.4 panicked on "timeout_sec = +A"), but the
// user's task must get an error, not a crash of the whole job.
var errDecoderPanic = errors.New("the TOML decoder failed on this file (a go-toml bug: please report the file to troupe)")

// decodeTOML decodes strictly, turning a panic of the decoder into
// errDecoderPanic.
func decodeTOML(data []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errDecoderPanic, p)
		}
	}()
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Load reads and checks a task folder. Every problem is reported, each
// naming its file (and line, in task.toml), before any container starts.
func Load(dir string) (*Task, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", dir, err)
	}
	t := &Task{Name: filepath.Base(abs), Dir: abs, AgentTimeout: DefaultAgentTimeout, VerifierTimeout: DefaultVerifierTimeout, BuildTimeout: DefaultBuildTimeout}
	var errs []error
	problem := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	tomlPath := filepath.Join(abs, "task.toml")
	data, err := readLimited(tomlPath, maxTaskTOMLBytes)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w (a Harbor task folder holds task.toml, instruction.md, environment/ and tests/test.sh)", dir, err)
	}
	var tf taskFile
	if err := decodeTOML(data, &tf); err != nil {
		errs = append(errs, tomlErrors(tomlPath, data, err)...)
		if _, ok := errors.AsType[*toml.StrictMissingError](err); !ok {
			// A syntax or type error stops the decoder: what it decoded
			// so far is not worth checking.
			tf = taskFile{}
		}
	}
	t.Image = strings.TrimSpace(tf.Environment.DockerImage)
	t.VerifierEnv = tf.Verifier.Env
	seconds := func(key string, v *float64, into *time.Duration) {
		switch {
		case v == nil:
		case *v <= 0 || math.IsNaN(*v) || *v > 7*24*3600:
			problem("%s: %s must be a number of seconds above 0 (at most a week), found %v", tomlPath, key, *v)
		default:
			*into = time.Duration(*v * float64(time.Second))
		}
	}
	seconds("[agent] timeout_sec", tf.Agent.TimeoutSec, &t.AgentTimeout)
	seconds("[verifier] timeout_sec", tf.Verifier.TimeoutSec, &t.VerifierTimeout)
	seconds("[environment] build_timeout_sec", tf.Environment.BuildTimeoutSec, &t.BuildTimeout)
	env := tf.Environment
	if env.CPUs != nil {
		if *env.CPUs <= 0 || math.IsNaN(*env.CPUs) {
			problem("%s: [environment] cpus must be above 0, found %v", tomlPath, *env.CPUs)
		}
		t.CPUs = *env.CPUs
	}
	for _, v := range []struct {
		key string
		p   *int64
		to  *int64
	}{{"memory_mb", env.MemoryMB, &t.MemoryMB}, {"storage_mb", env.StorageMB, &t.StorageMB}} {
		if v.p != nil {
			if *v.p <= 0 {
				problem("%s: [environment] %s must be above 0, found %d", tomlPath, v.key, *v.p)
			}
			*v.to = *v.p
		}
	}
	switch env.NetworkMode {
	case "", "no-network":
	case "public":
		t.Internet = true
	default:
		problem("%s: [environment] network_mode %q is not supported; use \"no-network\" (the default) or \"public\"", tomlPath, env.NetworkMode)
	}
	if env.AllowInternet != nil && *env.AllowInternet {
		t.Internet = true
	}
	if env.GPUs > 0 {
		problem("%s: [environment] gpus = %d: troupe does not give trials GPUs", tomlPath, env.GPUs)
	}
	if len(env.Env) > 0 {
		problem("%s: [environment] env is not supported: bake the variables into the image (ENV in environment/Dockerfile)", tomlPath)
	}
	if tf.Agent.NetworkMode != "" && tf.Agent.NetworkMode != env.NetworkMode {
		problem("%s: [agent] network_mode is not supported: the agents' network is the container's ([environment] network_mode)", tomlPath)
	}
	if m := tf.Verifier.EnvironmentMode; m != "" && m != "shared" {
		problem("%s: [verifier] environment_mode %q is not supported: the verifier runs in the agents' container (\"shared\")", tomlPath, m)
	}
	if len(tf.Steps) > 0 {
		problem("%s: [[steps]] (multi-step tasks) are not supported", tomlPath)
	}

	instruction, err := readLimited(filepath.Join(abs, "instruction.md"), maxInstructionBytes)
	switch {
	case err != nil:
		problem("%s: %w", filepath.Join(abs, "instruction.md"), err)
	case len(bytes.TrimSpace(instruction)) == 0:
		problem("%s: the instruction is empty", filepath.Join(abs, "instruction.md"))
	}
	t.Instruction = string(instruction)

	envDir := filepath.Join(abs, "environment")
	if isFile(filepath.Join(envDir, "Dockerfile")) {
		t.EnvDir = envDir
	} else if t.Image == "" {
		if isFile(filepath.Join(envDir, "docker-compose.yaml")) || isFile(filepath.Join(envDir, "docker-compose.yml")) {
			problem("%s: docker-compose environments are not supported; give environment/Dockerfile or [environment] docker_image", envDir)
		} else {
			problem("%s: no environment/Dockerfile and no [environment] docker_image: the task has no container to run in", abs)
		}
	}
	t.TestsDir = filepath.Join(abs, "tests")
	if !isFile(filepath.Join(t.TestsDir, "test.sh")) {
		problem("%s: tests/test.sh is missing: it is the verifier, writing /logs/verifier/reward.txt or reward.json", abs)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("task %s is not valid:\n%w", dir, err)
	}
	digest, err := runtime.DirDigest(abs)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", dir, err)
	}
	t.Digest = "sha256:" + digest
	return t, nil
}

// Find reads the tasks of each path: a task folder (with task.toml), or
// a folder of task folders (a dataset). Names must be unique: they name the
// trial folders.
func Find(paths []string) ([]*Task, error) {
	var tasks []*Task
	var errs []error
	for _, p := range paths {
		if isFile(filepath.Join(p, "task.toml")) {
			t, err := Load(p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			tasks = append(tasks, t)
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
				t, err := Load(filepath.Join(p, e.Name()))
				if err != nil {
					errs = append(errs, err)
					continue
				}
				tasks = append(tasks, t)
			}
		}
		if found == 0 {
			errs = append(errs, fmt.Errorf("tasks %s: neither a task (no task.toml) nor a folder of tasks", p))
		}
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

// tomlErrors turns the TOML decoder's error into located messages.
func tomlErrors(file string, data []byte, err error) []error {
	if strict, ok := errors.AsType[*toml.StrictMissingError](err); ok {
		var out []error
		for _, e := range strict.Errors {
			row, col := e.Position()
			key := e.Key()
			table := ""
			if len(key) > 1 {
				table = strings.Join(key[:len(key)-1], ".")
			}
			name := key[len(key)-1]
			msg := fmt.Sprintf("%s:%d:%d: unknown key %q", file, row, col, strings.Join(key, "."))
			if known, ok := knownKeys[table]; ok {
				if guess := yaml11.Suggest(name, known); guess != "" {
					msg += fmt.Sprintf("; did you mean %q?", guess)
				} else {
					msg += fmt.Sprintf("; the keys allowed here are %s", strings.Join(slices.Sorted(slices.Values(known)), ", "))
				}
			}
			out = append(out, errors.New(msg))
		}
		return out
	}
	if de, ok := errors.AsType[*toml.DecodeError](err); ok {
		row, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if strings.HasPrefix(msg, "cannot decode") || strings.Contains(msg, "cannot store") {
			key := strings.Join(de.Key(), ".")
			if lines := strings.Split(string(data), "\n"); key == "" && row >= 1 && row <= len(lines) {
				key, _, _ = strings.Cut(lines[row-1], "=")
				key = strings.TrimSpace(key)
			}
			msg = fmt.Sprintf("%s has the wrong type: numbers for timeouts and resources, strings for names and images, true or false for switches", cmp.Or(key, "this value"))
		}
		return []error{fmt.Errorf("%s:%d:%d: %s", file, row, col, msg)}
	}
	return []error{fmt.Errorf("%s: %w", file, err)}
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes; the limit is %d", path, info.Size(), limit)
	}
	data := make([]byte, info.Size())
	_, err = io.ReadFull(f, data)
	return data, err
}

func isFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}
