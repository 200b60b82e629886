package stack

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task/taskfs"
)

// Builtin is troupe's reference agent, the built-in stack: troupe's own
// binary, already in every trial container, run as `troupe agent`.
const Builtin = "troupe-agent"

// BuzzAgent is the original system's name for its reference agent, which
// manifests name as their harness: it means Builtin.
const BuzzAgent = "buzz-agent"

// maxUpload bounds a stack's uploaded files in all: they travel through
// each trial's tunnel.
const maxUpload = 512 << 20

// Stack is a program that can be a team member: what to put in the trial
// container, how to start it, and how the contract reaches it.
type Stack struct {
	Name string
	// Source says where it was defined: "built in", or a file.
	Source string
	// Files are uploaded into every trial container that runs the stack.
	Files []File
	// Command starts one agent, in its working folder, as its user.
	Command []string
	// Env maps variables the agent reads to contract values (ValueToken,
	// ValueLLMBaseURL...), beside the TROUPE_* variables every agent gets.
	Env map[string]string
	// FixedEnv are variables of fixed value; none may carry identity.
	FixedEnv map[string]string
	// Install, when set, is a script (its To unused) run before the agents
	// launch, as InstallUser, in a container of the task's image of its own
	// with the stack's files; what it leaves is kept as an image per task
	// image and stack digest, which later trials start from
	// (docs/stacks.md, "Install scripts").
	Install *File
	// InstallUser runs the install script: a user name or uid[:gid] of
	// the image; "" is root.
	InstallUser string
	// InstallTimeout bounds the install script; 0 is DefaultInstallTimeout.
	InstallTimeout time.Duration
	// Skills, when set, is where the agent's program reads skills (an
	// absolute path, or ~/… in the agent's HOME): a task's skills_dir is
	// copied there, owned by the agent, before it starts, as Harbor's
	// agents copy it to their own skills folder.
	Skills string
}

// DefaultInstallTimeout bounds an install script whose stack sets no
// install_timeout_sec.
const DefaultInstallTimeout = 600 * time.Second

// InstallDir is where an install script is put in its container:
// InstallDir/<stack>/install. It stays in the image the install makes.
const InstallDir = "/opt/troupe-install"

// File is a file or folder of the host uploaded at To in the container,
// pinned by its digest (HostDigest's).
type File struct {
	// Path is on the host: as the stack wrote it, joined to the folder of
	// the file that defines the stack when it is relative.
	Path string
	// Written is the path as the stack wrote it, which messages show with
	// what it was resolved against; "" when it is Path.
	Written string
	To      string // in the container, absolute
	Mode    fs.FileMode
	SHA256  string
}

// shown is the file's path for a message; source is the file that
// defines its stack.
func (f File) shown(source string) string {
	if f.Written == "" {
		return f.Path
	}
	return showPath(f.Written, source)
}

// showPath is a stack file's path for a message: an absolute path as it
// is, a relative one as written with the folder it was resolved against,
// that of source (the file that defines the stack), and where that leads:
// "./dist/agent (resolved against /w, the folder of /w/stacks.yaml:
// /w/dist/agent)".
func showPath(written, source string) string {
	if filepath.IsAbs(written) {
		return written
	}
	dir := sourceDir(source)
	return fmt.Sprintf("%s (resolved against %s, the folder of %s: %s)", written, dir, source, filepath.Join(dir, written))
}

// sourceDir is the folder of source, the file that defines a stack, made
// absolute: the folder a relative path of the stack is in.
func sourceDir(source string) string {
	dir := filepath.Dir(source)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return dir
}

// builtin is the reference agent's stack.
var builtin = &Stack{Name: Builtin, Source: "built in", Command: []string{runtime.BinaryPath, "agent"}}

// Set is the stacks a job may use, by name.
type Set map[string]*Stack

// Resolve finds the stack a manifest's harness names: buzz-agent (the
// default) and troupe-agent are the built-in reference agent; any other
// name must be defined.
func (s Set) Resolve(harness string) (*Stack, error) {
	switch harness {
	case "", BuzzAgent, Builtin:
		if st, ok := s[Builtin]; ok {
			return st, nil
		}
		return builtin, nil
	}
	if st, ok := s[harness]; ok {
		return st, nil
	}
	return nil, &UndefinedError{Name: harness, Known: slices.Sorted(maps.Keys(s))}
}

// UndefinedError is a harness no stack defines.
type UndefinedError struct {
	Name  string
	Known []string
}

func (e *UndefinedError) Error() string {
	known := "none is defined"
	if len(e.Known) > 0 {
		known = "defined: " + strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("harness %q names no stack (%s; built in: %s, also called %s). Define it under stacks: in troupe's config file or in stacks.yaml beside the manifest: the files to upload with their sha256, the command, and which contract values its agent reads under which names (docs/stacks.md, \"Stacks\"); troupe stacks list shows what is defined",
		e.Name, known, Builtin, BuzzAgent)
}

// Digest identifies the stack's build: its files' digests, command and
// environment. Results and lock files record it; resuming refuses a job
// whose stack changed.
func (st *Stack) Digest() string {
	type file struct {
		To     string `json:"to"`
		Mode   uint32 `json:"mode"`
		SHA256 string `json:"sha256"`
	}
	type install struct {
		SHA256 string `json:"sha256"`
		User   string `json:"user,omitempty"`
	}
	doc := struct {
		Command  []string          `json:"command"`
		Files    []file            `json:"files"`
		Env      map[string]string `json:"env"`
		FixedEnv map[string]string `json:"fixed_env"`
		// Only with a script: a stack without one keeps its digest.
		Install *install `json:"install,omitempty"`
		Skills  string   `json:"skills,omitempty"`
	}{Command: st.Command, Env: st.Env, FixedEnv: st.FixedEnv, Skills: st.Skills}
	for _, f := range st.Files {
		doc.Files = append(doc.Files, file{f.To, uint32(f.Mode), f.SHA256})
	}
	if st.Install != nil {
		doc.Install = &install{st.Install.SHA256, st.InstallUser}
	}
	data, _ := json.Marshal(doc) // maps marshal in key order
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Check checks a stack's definition: the command, the mapping, and that no
// fixed variable carries identity. It reads no file (Verify does).
func (st *Stack) Check() error {
	var errs []error
	switch {
	case len(st.Command) == 0 || st.Command[0] == "":
		errs = append(errs, errors.New("command is empty"))
	case strings.Contains(st.Command[0], "/") && !path.IsAbs(st.Command[0]):
		// The command runs in the container, where a relative path is the
		// task's working folder's, never the stacks file's folder.
		errs = append(errs, fmt.Errorf("command: %s is a relative path, which the container resolves against the task's working folder (TROUPE_WORKDIR, such as /app), not against %s, the folder of %s; upload the program with files: and name it by its to: path, such as /opt/%s/%s",
			st.Command[0], sourceDir(st.Source), st.Source, st.Name, path.Base(st.Command[0])))
	}
	known := valueNamesSet()
	for name, value := range st.Env {
		switch {
		case !envName(name):
			errs = append(errs, fmt.Errorf("env: %q is not a variable name", name))
		case contract.Reserved(name):
			errs = append(errs, fmt.Errorf("env: %s is the contract's own (HOME and the TROUPE_* variables troupe sets): troupe sets it, a stack cannot; map the value to a variable of the agent's own instead", name))
		}
		if !known[value] {
			errs = append(errs, fmt.Errorf("env: %s maps %q, which is not a contract value (%s)", name, value, valueNames()))
		}
	}
	for name := range st.FixedEnv {
		switch {
		case !envName(name):
			errs = append(errs, fmt.Errorf("fixed_env: %q is not a variable name", name))
		case contract.Reserved(name):
			errs = append(errs, fmt.Errorf("fixed_env: %s is the contract's own (HOME and the TROUPE_* variables troupe sets: identity, home, the pinned persona's file, the model, the round limit, the generation settings): troupe sets it, a stack cannot", name))
		case st.Env[name] != "":
			errs = append(errs, fmt.Errorf("fixed_env: %s is also mapped from the agent's %s in env: one variable has one source", name, st.Env[name]))
		}
	}
	seen := map[string]bool{}
	for _, f := range st.Files {
		switch {
		case !path.IsAbs(f.To) || path.Clean(f.To) != f.To:
			errs = append(errs, fmt.Errorf("files: %s: to %q must be an absolute, clean path", f.Path, f.To))
		case strings.HasPrefix(f.To, "/run/troupe") || strings.HasPrefix(f.To, "/opt/troupe") || f.To == "/":
			errs = append(errs, fmt.Errorf("files: %s: to %s is troupe's own", f.Path, f.To))
		case seen[f.To]:
			errs = append(errs, fmt.Errorf("files: %s is uploaded twice", f.To))
		}
		seen[f.To] = true
		if !validDigest(f.SHA256) {
			errs = append(errs, fmt.Errorf("files: %s: sha256 must be sha256:<64 hex digits> (troupe stacks pin %s sets it; troupe hash --file PATH prints it)", f.Path, st.Name))
		}
	}
	switch {
	case st.Install != nil && !validDigest(st.Install.SHA256):
		errs = append(errs, fmt.Errorf("install: %s: sha256 must be sha256:<64 hex digits> (troupe stacks pin %s sets it; troupe hash --file PATH prints it)", st.Install.Path, st.Name))
	case st.Install == nil && (st.InstallUser != "" || st.InstallTimeout != 0):
		errs = append(errs, errors.New("install_user and install_timeout_sec need an install script (install: {path, sha256})"))
	}
	if u := st.InstallUser; u != "" && (strings.ContainsAny(u, " \t\n") || strings.Count(u, ":") > 1 || strings.HasPrefix(u, ":") || strings.HasSuffix(u, ":")) {
		errs = append(errs, fmt.Errorf("install_user: %q is not a user name or uid[:gid]", u))
	}
	if st.InstallTimeout < 0 {
		errs = append(errs, errors.New("install_timeout_sec must be more than 0"))
	}
	if st.Skills != "" {
		if err := checkSkills(st.Skills); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stack %s (%s): %w", st.Name, st.Source, err)
	}
	return nil
}

// checkSkills checks a stack's skills folder: absolute or in HOME, clean,
// and none of troupe's own.
func checkSkills(p string) error {
	full := p
	if p == "~" || strings.HasPrefix(p, "~/") {
		full = "/home/agent" + strings.TrimPrefix(p, "~")
	}
	switch {
	case !path.IsAbs(full) || path.Clean(full) != strings.TrimSuffix(full, "/") && full != "/":
		return fmt.Errorf("skills: %q must be an absolute, clean path or one under ~/ (the agent's HOME), such as ~/.claude/skills", p)
	case strings.HasPrefix(full, "/run/troupe") || strings.HasPrefix(full, "/opt/troupe") || full == "/":
		return fmt.Errorf("skills: %s is troupe's own", p)
	}
	return nil
}

// SkillsIn is where the agent whose HOME is home reads skills; "" when
// the stack names no folder.
func (st *Stack) SkillsIn(home string) string {
	switch {
	case st.Skills == "":
		return ""
	case st.Skills == "~" || strings.HasPrefix(st.Skills, "~/"):
		return path.Join(home, strings.TrimPrefix(st.Skills, "~"))
	default:
		return path.Clean(st.Skills)
	}
}

func validDigest(s string) bool {
	return strings.HasPrefix(s, "sha256:") && len(s) == len("sha256:")+64
}

func valueNamesSet() map[string]bool {
	out := map[string]bool{}
	for _, n := range strings.Split(valueNames(), ", ") {
		out[n] = true
	}
	return out
}

func envName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Verify reads the stack's files and checks each against its pinned
// digest, and returns them as the container's files (owned by root,
// readable and runnable by every agent, as their modes say). A mismatch
// names the file.
func (st *Stack) Verify() ([]runtime.File, error) {
	if err := st.Check(); err != nil {
		return nil, err
	}
	var out []runtime.File
	var total int64
	var errs []error
	for _, f := range st.Files {
		got, files, err := read(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("stack %s: %w", st.Name, fileError(st.Source, f, err)))
			continue
		}
		if got != f.SHA256 {
			errs = append(errs, fmt.Errorf("stack %s: %s has %s, but the stack pins %s: the file changed since it was pinned (troupe stacks pin %s updates the pins)", st.Name, f.shown(st.Source), got, f.SHA256, st.Name))
			continue
		}
		for _, rf := range files {
			total += int64(len(rf.Data))
		}
		out = append(out, files...)
	}
	if total > maxUpload {
		errs = append(errs, fmt.Errorf("stack %s: its files are %d bytes, over the %d a trial uploads", st.Name, total, maxUpload))
	}
	if st.Install != nil {
		if _, err := st.InstallScript(); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// InstallScript reads the install script, checks it against its pinned
// digest, and returns it as the file to run: InstallDir/<stack>/install,
// root's, mode 0755. A mismatch names the file.
func (st *Stack) InstallScript() (runtime.File, error) {
	f := *st.Install
	if info, err := os.Stat(f.Path); err == nil && info.IsDir() {
		return runtime.File{}, fmt.Errorf("stack %s: install: %s is a folder: the install script is one file (upload a folder with files:)", st.Name, f.shown(st.Source))
	}
	f.To = path.Join(InstallDir, st.Name, "install")
	got, files, err := read(f)
	switch {
	case err != nil:
		return runtime.File{}, fmt.Errorf("stack %s: install: %w", st.Name, fileError(st.Source, f, err))
	case got != f.SHA256:
		return runtime.File{}, fmt.Errorf("stack %s: install: %s has %s, but the stack pins %s: the script changed since it was pinned (troupe stacks pin %s updates the pins)", st.Name, f.shown(st.Source), got, f.SHA256, st.Name)
	}
	files[0].Mode = 0o755
	return files[0], nil
}

// fileError says what reading a stack's file failed on, naming the file
// with what its path was resolved against; source is the file that
// defines the stack.
func fileError(source string, f File, err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok && pe.Path == f.Path && errors.Is(pe.Err, fs.ErrNotExist) {
		return &missingError{f.shown(source)}
	}
	return fmt.Errorf("%s: %w", f.shown(source), err)
}

// missingError is a stack's file that does not exist, named as shown:
// "PATH does not exist". It is fs.ErrNotExist to errors.Is.
type missingError struct{ shown string }

func (e *missingError) Error() string { return e.shown + " does not exist" }
func (e *missingError) Unwrap() error { return fs.ErrNotExist }

// read reads a stack's file or folder and returns its digest and the
// container files it makes.
func read(f File) (string, []runtime.File, error) {
	info, err := os.Stat(f.Path)
	if err != nil {
		return "", nil, err
	}
	if !info.IsDir() {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			return "", nil, err
		}
		digest, _ := fileDigest(bytes.NewReader(data))
		mode := f.Mode
		if mode == 0 {
			mode = info.Mode().Perm() | 0o444
		}
		return digest, []runtime.File{{Path: f.To, Data: data, Mode: mode}}, nil
	}
	digest, err := folderDigest(f.Path)
	if err != nil {
		return "", nil, err
	}
	var files []runtime.File
	err = filepath.WalkDir(f.Path, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(f.Path, p)
		to := path.Join(f.To, filepath.ToSlash(rel))
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			files = append(files, runtime.File{Path: to, Mode: fs.ModeDir | 0o755})
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, runtime.File{Path: to, Data: data, Mode: info.Mode().Perm() | 0o444})
		default:
			return fmt.Errorf("%s is not a regular file or folder: a stack uploads those only", p)
		}
		return nil
	})
	return digest, files, err
}

// HostDigest is the digest a stack pins for a file or folder of the host,
// as sha256:<64 hex digits>: a regular file's is the SHA-256 of its bytes,
// read as a stream (a file of any size); a folder's is taskfs.Digest's.
// Verify accepts exactly these; troupe hash prints them and troupe stacks
// pin writes them. Anything else (a device, a FIFO) is refused.
func HostDigest(path string) (string, error) {
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return "", err
	case info.IsDir():
		return folderDigest(path)
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file or folder: a stack uploads those only", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	digest, err := fileDigest(f)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return digest, nil
}

// fileDigest is a file's pin: the SHA-256 of its bytes.
func fileDigest(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// folderDigest is a folder's pin: taskfs.Digest's.
func folderDigest(dir string) (string, error) {
	digest, err := taskfs.Digest(dir)
	if err != nil {
		return "", err
	}
	return "sha256:" + digest, nil
}

// Launch is the command and environment that start one agent of the
// stack: the contract's TROUPE_* variables and HOME, the stack's mapped
// values (key and token are the secrets' content, for agents that read
// them from a variable), then its fixed variables.
func (st *Stack) Launch(v contract.Values, key, token string) ([]string, []string) {
	env := v.Env()
	vals := values(v, key, token)
	// Check refuses a stack that names a contract variable; Launch never
	// lets one through either, so what the agent reads as its persona,
	// identity and home is troupe's whatever the stack says.
	for name, value := range st.Env {
		if !contract.Reserved(name) {
			env[name] = vals[value]
		}
	}
	for name, value := range st.FixedEnv {
		if !contract.Reserved(name) && st.Env[name] == "" {
			env[name] = value
		}
	}
	var list []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		list = append(list, k+"="+env[k])
	}
	return slices.Clone(st.Command), list
}

// ELFMachine is the architecture an ELF file is built for, or "" when data
// is not ELF; troupe stacks check wants x86-64 for linux/amd64 containers.
func ELFMachine(data []byte) string {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return ""
	}
	defer f.Close()
	return f.Machine.String()
}
