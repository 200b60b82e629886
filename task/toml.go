package task

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/suggest"
)

// taskFile is task.toml as Harbor defines it (schema 1.3, the keys of 1.0
// to 1.2 included). Values Harbor reads loosely (numbers as strings, whole
// floats as integers, a user as a name or a uid) are decoded as they are
// written and converted by the fields below, each with its line.
type taskFile struct {
	Version       any            `toml:"version"` // the old name of schema_version
	SchemaVersion any            `toml:"schema_version"`
	Source        any            `toml:"source"`
	Artifacts     []any          `toml:"artifacts"`
	MultiStep     any            `toml:"multi_step_reward_strategy"`
	Task          map[string]any `toml:"task"`
	Metadata      map[string]any `toml:"metadata"`
	Agent         struct {
		TimeoutSec   any `toml:"timeout_sec"`
		User         any `toml:"user"`
		NetworkMode  any `toml:"network_mode"`
		AllowedHosts any `toml:"allowed_hosts"`
	} `toml:"agent"`
	Verifier struct {
		TimeoutSec      any            `toml:"timeout_sec"`
		Env             map[string]any `toml:"env"`
		User            any            `toml:"user"`
		NetworkMode     any            `toml:"network_mode"`
		AllowedHosts    any            `toml:"allowed_hosts"`
		EnvironmentMode any            `toml:"environment_mode"`
		Environment     map[string]any `toml:"environment"`
		Collect         []any          `toml:"collect"`
	} `toml:"verifier"`
	Environment struct {
		DockerImage     any              `toml:"docker_image"`
		BuildTimeoutSec any              `toml:"build_timeout_sec"`
		CPUs            any              `toml:"cpus"`
		MemoryMB        any              `toml:"memory_mb"`
		StorageMB       any              `toml:"storage_mb"`
		Memory          any              `toml:"memory"`
		Storage         any              `toml:"storage"`
		GPUs            any              `toml:"gpus"`
		GPUTypes        any              `toml:"gpu_types"`
		AllowInternet   any              `toml:"allow_internet"`
		NetworkMode     any              `toml:"network_mode"`
		AllowedHosts    any              `toml:"allowed_hosts"`
		MCPServers      []map[string]any `toml:"mcp_servers"`
		Env             map[string]any   `toml:"env"`
		SkillsDir       any              `toml:"skills_dir"`
		Healthcheck     map[string]any   `toml:"healthcheck"`
		Workdir         any              `toml:"workdir"`
		OS              any              `toml:"os"`
		TPU             map[string]any   `toml:"tpu"`
	} `toml:"environment"`
	Solution struct {
		Env map[string]any `toml:"env"`
	} `toml:"solution"`
	Steps []map[string]any `toml:"steps"`
}

// knownKeys are task.toml's keys by table, for "did you mean".
var knownKeys = map[string][]string{
	"":            {"version", "schema_version", "source", "artifacts", "multi_step_reward_strategy", "task", "metadata", "agent", "verifier", "environment", "solution", "steps"},
	"agent":       {"timeout_sec", "user", "network_mode", "allowed_hosts"},
	"verifier":    {"timeout_sec", "env", "user", "network_mode", "allowed_hosts", "environment_mode", "environment", "collect"},
	"environment": {"docker_image", "build_timeout_sec", "cpus", "memory_mb", "storage_mb", "memory", "storage", "gpus", "gpu_types", "allow_internet", "network_mode", "allowed_hosts", "mcp_servers", "env", "skills_dir", "healthcheck", "workdir", "os", "tpu"},
	"solution":    {"env"},
}

// errDecoderPanic marks a task.toml the TOML library could not survive. It
// is a library bug (go-toml 2.2.4 panicked on "timeout_sec = +A"), but the
// user's task must get an error, not a crash of the whole job.
var errDecoderPanic = errors.New("the TOML decoder failed on this file (a go-toml bug: please report the file to troupe)")

// decodeTOML decodes data into v. Strict, it reports keys v does not
// define (a *toml.StrictMissingError, with v filled all the same);
// otherwise it ignores them. A panic of the decoder becomes
// errDecoderPanic.
func decodeTOML(data []byte, v any, strict bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errDecoderPanic, p)
		}
	}()
	dec := toml.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	return dec.Decode(v)
}

// readTOML reads task.toml into t. It is pure: bytes in, and getenv (the
// host's variables, for ${VAR} values) its only view of the host. It
// returns the file's values (nil when the file is not TOML), the warnings
// about keys Harbor does not define, and every problem, each located in
// file at the line (and, where the decoder says, the column) of its key.
func (t *Task) readTOML(file string, data []byte, getenv func(string) string) (tf *taskFile, warnings, errs []*located.Error) {
	tf, warnings, err := parseFile(file, data)
	if err != nil {
		// Nothing else about task.toml can be said: it was not read.
		return nil, nil, []*located.Error{err}
	}
	p := &problems{}
	warnings = append(warnings, t.apply(tf, newLocator(file, data), p, getenv)...)
	return tf, warnings, p.errs
}

// parseFile reads task.toml: the file's values, the warnings about keys
// Harbor does not define (it ignores them, and so does troupe), or the one
// error that stopped the reading (a syntax error: nothing after it was
// read, so nothing else is said about the file).
func parseFile(path string, data []byte) (*taskFile, []*located.Error, *located.Error) {
	var tf taskFile
	err := decodeTOML(data, &tf, true)
	strict, unknown := errors.AsType[*toml.StrictMissingError](err)
	switch {
	case err == nil:
		return &tf, nil, nil
	case !unknown:
		return nil, nil, locateDecodeError(path, data, err)
	}
	// The strict pass stops at the first unknown key in some tables: read
	// the values again, ignoring what is unknown.
	tf = taskFile{}
	if err := decodeTOML(data, &tf, false); err != nil {
		return nil, nil, locateDecodeError(path, data, err)
	}
	var warnings []*located.Error
	for _, e := range strict.Errors {
		row, col := e.Position()
		key := e.Key()
		table, name := strings.Join(key[:len(key)-1], "."), key[len(key)-1]
		msg := fmt.Sprintf("unknown key %q, ignored (Harbor ignores it too)", strings.Join(key, "."))
		if known, ok := knownKeys[table]; ok {
			if guess := suggest.Closest(name, known); guess != "" {
				msg += fmt.Sprintf("; did you mean %q?", guess)
			}
		}
		warnings = append(warnings, &located.Error{File: path, Line: row, Col: col, Err: errors.New(msg)})
	}
	return &tf, warnings, nil
}

// locateDecodeError turns the decoder's error into one located problem,
// at the decoder's line and column.
func locateDecodeError(path string, data []byte, err error) *located.Error {
	de, ok := errors.AsType[*toml.DecodeError](err)
	if !ok {
		return &located.Error{File: path, Err: err}
	}
	row, col := de.Position()
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	if strings.HasPrefix(msg, "cannot decode") || strings.Contains(msg, "cannot store") {
		key := strings.Join(de.Key(), ".")
		if lines := strings.Split(string(data), "\n"); key == "" && row >= 1 && row <= len(lines) {
			key, _, _ = strings.Cut(lines[row-1], "=")
			key = strings.TrimSpace(key)
		}
		msg = fmt.Sprintf("%s has the wrong type: a table here holds keys, a list holds values", cmp.Or(key, "this value"))
	}
	return &located.Error{File: path, Line: row, Col: col, Err: fmt.Errorf("%s (the rest of the file was not read)", msg)}
}
