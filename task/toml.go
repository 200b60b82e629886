package task

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
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

// parseFile reads task.toml: the file's values, the warnings about keys
// Harbor does not define (it ignores them, and so does troupe), or the one
// error that stopped the reading (a syntax error: nothing after it was
// read, so nothing else is said about the file).
func parseFile(path string, data []byte) (*taskFile, []string, error) {
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
	var warnings []string
	for _, e := range strict.Errors {
		row, col := e.Position()
		key := e.Key()
		table, name := strings.Join(key[:len(key)-1], "."), key[len(key)-1]
		msg := fmt.Sprintf("%s:%d:%d: unknown key %q, ignored (Harbor ignores it too)", path, row, col, strings.Join(key, "."))
		if known, ok := knownKeys[table]; ok {
			if guess := suggest.Closest(name, known); guess != "" {
				msg += fmt.Sprintf("; did you mean %q?", guess)
			}
		}
		warnings = append(warnings, msg)
	}
	return &tf, warnings, nil
}

// locateDecodeError turns the decoder's error into one located message.
func locateDecodeError(path string, data []byte, err error) error {
	de, ok := errors.AsType[*toml.DecodeError](err)
	if !ok {
		return fmt.Errorf("%s: %w", path, err)
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
	return fmt.Errorf("%s:%d:%d: %s (the rest of the file was not read)", path, row, col, msg)
}

// field names one value of task.toml for messages: its file, table, key
// and, where it can be found, its line.
type field struct {
	path, table, key string
	line             int
}

func (f field) String() string {
	name := f.key
	if f.table != "" {
		name = "[" + f.table + "] " + f.key
	}
	if f.line > 0 {
		return fmt.Sprintf("%s:%d: %s", f.path, f.line, name)
	}
	return fmt.Sprintf("%s: %s", f.path, name)
}

// locator finds the line of a key in task.toml: after the header of its
// table ([table], or [[table]] for a list of tables), or as a dotted key
// (table.key = …) anywhere.
type locator struct {
	path  string
	lines []string
}

func newLocator(path string, data []byte) locator {
	return locator{path: path, lines: strings.Split(string(data), "\n")}
}

var headerRE = regexp.MustCompile(`^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$`)

// at names a key of a table ("" for the top level; "environment.healthcheck"
// for a sub-table).
func (l locator) at(table, key string) field {
	f := field{path: l.path, table: table, key: key}
	current := ""
	for i, line := range l.lines {
		if m := headerRE.FindStringSubmatch(line); m != nil {
			current = strings.ReplaceAll(m[1], " ", "")
			if current == strings.TrimPrefix(table+"."+key, ".") {
				f.line = i + 1 // the key is a table of its own
				return f
			}
			continue
		}
		name, _, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		name = strings.ReplaceAll(strings.TrimSpace(name), " ", "")
		full := name
		if current != "" {
			full = current + "." + name
		}
		want := key
		if table != "" {
			want = table + "." + key
		}
		if full == want {
			f.line = i + 1
			return f
		}
	}
	return f
}

// problems collects the errors of one task.toml.
type problems struct {
	errs []error
}

func (p *problems) add(f field, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", f, fmt.Sprintf(format, args...)))
}

// The conversions below read a value as Harbor's models do (pydantic's lax
// mode); ok is false, with the problem recorded, when Harbor refuses it too.

// asString reads a string; Harbor takes no number for one.
func (p *problems) asString(f field, v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", true
	case string:
		return v, true
	}
	p.add(f, "must be a string, found %v", v)
	return "", false
}

// asFloat reads a number of seconds or of CPUs: a number, or a string
// holding one.
func (p *problems) asFloat(f field, v any) (float64, bool) {
	var x float64
	switch v := v.(type) {
	case int64:
		x = float64(v)
	case float64:
		x = v
	case string:
		var err error
		if x, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			p.add(f, "must be a number, found %q", v)
			return 0, false
		}
	default:
		p.add(f, "must be a number, found %v", v)
		return 0, false
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		p.add(f, "must be a finite number, found %v", x)
		return 0, false
	}
	return x, true
}

// asInt reads a whole number: an integer, a float without a fraction, a
// string holding one, or a boolean (1 or 0), as Harbor does.
func (p *problems) asInt(f field, v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), true
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			return n, true
		}
	}
	p.add(f, "must be a whole number, found %v", v)
	return 0, false
}

// asBool reads true or false, or the strings "true" and "false".
func (p *problems) asBool(f field, v any) (bool, bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			return b, true
		}
	}
	p.add(f, "must be true or false, found %v", v)
	return false, false
}

// asUser reads a user: a name or a uid.
func (p *problems) asUser(f field, v any) string {
	switch u := v.(type) {
	case nil:
		return ""
	case string:
		if strings.ContainsAny(u, ":\n") {
			p.add(f, "must be a user name or a uid, found %q", u)
			return ""
		}
		return strings.TrimSpace(u)
	}
	n, ok := p.asInt(f, v)
	if !ok || n < 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// asStrings reads a list of strings.
func (p *problems) asStrings(f field, v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		p.add(f, "must be a list of strings, found %v", v)
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			p.add(f, "must be a list of strings, found %v among them", x)
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// sizeMB reads Harbor's older memory and storage spellings: "2G", "512M",
// "1024K" (binary units, case and spaces ignored, truncated to whole MiB).
func (p *problems) sizeMB(f field, v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		p.add(f, "must be a string such as \"2G\" or \"512M\" (or use %s_mb, a number of MiB), found %v", f.key, v)
		return 0, false
	}
	t := strings.ToUpper(strings.TrimSpace(s))
	scale := map[byte]float64{'G': 1024, 'M': 1, 'K': 1.0 / 1024}
	if t != "" {
		if k, ok := scale[t[len(t)-1]]; ok {
			if x, err := strconv.ParseFloat(t[:len(t)-1], 64); err == nil && x >= 0 && !math.IsInf(x, 0) {
				return int64(x * k), true
			}
		}
	}
	p.add(f, "%q is not a size such as \"2G\", \"512M\" or \"1024K\"", s)
	return 0, false
}

// knownIn reports keys of a sub-table that Harbor does not define, as
// warnings, each at its line.
func knownIn(at locator, table string, m map[string]any, known ...string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, k) {
			msg := fmt.Sprintf("%s: unknown key, ignored (Harbor ignores it too)", at.at(table, k))
			if guess := suggest.Closest(k, known); guess != "" {
				msg += fmt.Sprintf("; did you mean %q?", guess)
			}
			out = append(out, msg)
		}
	}
	return out
}
