package stack

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/troupebench/troupe/internal/yaml11"
)

// FileName is the file beside a manifest that may define stacks.
const FileName = "stacks.yaml"

// maxFile bounds a stacks file.
const maxFile = 1 << 20

var stackName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Parse decodes a `stacks:` mapping (troupe's config file, or a stacks
// file): name → {command, files, env, fixed_env, install, install_user,
// install_timeout_sec, skills}. Files' paths are relative to dir, the defining
// file's folder; source names that file.
// Problems go to d, each located.
func Parse(d *yaml11.Decoder, n *yaml11.Node, path, dir, source string) Set {
	out := Set{}
	d.Map(n, path, func(name string, key, v *yaml11.Node, path string) {
		switch {
		case !stackName.MatchString(name):
			d.Errorf(key, path, "a stack's name is lower-case letters, digits, '.', '_' and '-', such as goose or codex; found %q", name)
			return
		case name == Builtin || name == BuzzAgent:
			d.Errorf(key, path, "%s is troupe's built-in reference agent and cannot be redefined; give this stack another name", name)
			return
		}
		st := &Stack{Name: name, Source: source}
		before := d.Count()
		d.Struct(v, path, []yaml11.Field{
			{Name: "command", Required: true, Decode: func(n *yaml11.Node, path string) {
				d.Seq(n, path, func(n *yaml11.Node, path string) {
					if s, ok := d.String(n, path); ok {
						st.Command = append(st.Command, s)
					}
				})
				if len(st.Command) == 0 {
					d.Errorf(n, path, "must name the program to run, such as [/opt/goose/bin/goose, acp]")
				}
			}},
			{Name: "files", Decode: func(n *yaml11.Node, path string) {
				d.Seq(n, path, func(n *yaml11.Node, path string) {
					if f, ok := parseFile(d, n, path, dir); ok {
						st.Files = append(st.Files, f)
					}
				})
			}},
			{Name: "env", Decode: func(n *yaml11.Node, path string) { st.Env = stringMap(d, n, path) }},
			{Name: "fixed_env", Decode: func(n *yaml11.Node, path string) { st.FixedEnv = stringMap(d, n, path) }},
			{Name: "install", Decode: func(n *yaml11.Node, path string) {
				if f, ok := parseInstall(d, n, path, dir); ok {
					st.Install = &f
				}
			}},
			{Name: "install_user", Decode: func(n *yaml11.Node, path string) { st.InstallUser, _ = d.String(n, path) }},
			{Name: "skills", Decode: func(n *yaml11.Node, path string) { st.Skills, _ = d.String(n, path) }},
			{Name: "install_timeout_sec", Decode: func(n *yaml11.Node, path string) {
				if v, ok := d.Float(n, path); ok {
					if v <= 0 || v > 24*3600 {
						d.Errorf(n, path, "must be more than 0 and at most a day (86400), in seconds; found %v", v)
						return
					}
					st.InstallTimeout = time.Duration(v * float64(time.Second))
				}
			}},
		}, nil)
		if d.Count() > before {
			return
		}
		if err := st.Check(); err != nil {
			d.Errorf(v, path, "%w", err)
			return
		}
		out[name] = st
	})
	return out
}

func parseFile(d *yaml11.Decoder, n *yaml11.Node, path, dir string) (File, bool) {
	before := d.Count()
	var f File
	d.Struct(n, path, []yaml11.Field{
		{Name: "path", Required: true, Decode: func(n *yaml11.Node, path string) { f.Path, f.Written = hostPath(d, n, path, dir) }},
		{Name: "to", Required: true, Decode: func(n *yaml11.Node, path string) { f.To, _ = d.String(n, path) }},
		{Name: "sha256", Required: true, Decode: func(n *yaml11.Node, path string) { f.SHA256, _ = d.String(n, path) }},
		{Name: "mode", Decode: func(n *yaml11.Node, path string) {
			s, ok := d.String(n, path)
			if !ok {
				return
			}
			m, err := strconv.ParseUint(s, 8, 32)
			if err != nil || m > 0o7777 {
				d.Errorf(n, path, "must be an octal mode in quotes, such as \"0755\"; found %q", s)
				return
			}
			f.Mode = fs.FileMode(m)
		}},
	}, nil)
	return f, d.Count() == before
}

// parseInstall reads install: {path, sha256}: a script of the host, run
// in the container from InstallDir.
func parseInstall(d *yaml11.Decoder, n *yaml11.Node, path, dir string) (File, bool) {
	before := d.Count()
	var f File
	d.Struct(n, path, []yaml11.Field{
		{Name: "path", Required: true, Decode: func(n *yaml11.Node, path string) { f.Path, f.Written = hostPath(d, n, path, dir) }},
		{Name: "sha256", Required: true, Decode: func(n *yaml11.Node, path string) { f.SHA256, _ = d.String(n, path) }},
	}, nil)
	return f, d.Count() == before
}

// hostPath reads a file's path: see resolve.
func hostPath(d *yaml11.Decoder, n *yaml11.Node, path, dir string) (host, written string) {
	s, ok := d.String(n, path)
	if !ok {
		return s, ""
	}
	return resolve(s, dir)
}

// resolve is a path a stack writes as it is on the host: in dir unless
// absolute; written is the path as written when it is relative
// (File.Written), else "".
func resolve(p, dir string) (host, written string) {
	if filepath.IsAbs(p) {
		return p, ""
	}
	return filepath.Join(dir, p), p
}

func stringMap(d *yaml11.Decoder, n *yaml11.Node, path string) map[string]string {
	out := map[string]string{}
	d.Map(n, path, func(key string, _, v *yaml11.Node, path string) {
		if s, ok := d.String(v, path); ok {
			out[key] = s
		}
	})
	return out
}

// LoadFile reads a stacks file: a mapping with one key, stacks. A missing
// file defines nothing.
func LoadFile(path string) (Set, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return Set{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stacks file: %w", err)
	}
	return ParseFile(path, data)
}

// ParseFile decodes a stacks file's bytes: a mapping with one key, stacks.
// It is pure: path names the file in messages, and its folder is the one
// the stacks' relative paths are in. A file over its size bound is refused
// with a plain error; every other problem is a *located.Error (a syntax
// error alone, the rest in a located.List in file order).
func ParseFile(path string, data []byte) (Set, error) {
	if len(data) > maxFile {
		return nil, fmt.Errorf("stacks file %s is larger than %d bytes", path, maxFile)
	}
	root, err := yaml11.Parse(path, data)
	if err != nil {
		return nil, err
	}
	out := Set{}
	if yaml11.IsNull(root) {
		return out, nil
	}
	d := yaml11.Decoder{File: path}
	d.Struct(root, "", []yaml11.Field{
		{Name: "stacks", Required: true, Decode: func(n *yaml11.Node, p string) {
			out = Parse(&d, n, p, filepath.Dir(path), path)
		}},
	}, nil)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Merge joins sets; a name defined twice is an error naming both places.
func Merge(sets ...Set) (Set, error) {
	out := Set{}
	for _, s := range sets {
		for _, name := range slices.Sorted(maps.Keys(s)) {
			if prev, ok := out[name]; ok && prev.Digest() != s[name].Digest() {
				return nil, fmt.Errorf("stack %s is defined twice, differently: in %s and in %s", name, prev.Source, s[name].Source)
			}
			out[name] = s[name]
		}
	}
	return out, nil
}
