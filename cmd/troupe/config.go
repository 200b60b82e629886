package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/stack"
)

// maxConfigSize bounds the config file; it holds a few endpoints.
const maxConfigSize = 1 << 20

// config is troupe's configuration file, read strictly: unknown keys are
// errors, located like manifest errors.
type config struct {
	// path is the file read, or "" when there is none.
	path      string
	endpoints llm.Endpoints
	// stacks are the config file's stacks: (docs/stacks.md).
	stacks stack.Set
	// settings are the scalar settings, by viper key, for the file layer of
	// viper's precedence. Paths are already made absolute against the
	// file's folder.
	settings map[string]any
	// hostPaths are allow_host_paths: the host paths tasks may bind.
	hostPaths []string
}

// configCandidates lists where the config file is looked for, in order, when
// neither --config nor $TROUPE_CONFIG names one.
func configCandidates() []string {
	out := []string{"troupe.yaml"}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".config")
		}
	}
	if dir != "" {
		out = append(out, filepath.Join(dir, "troupe", "config.yaml"))
	}
	return out
}

// configPath is the config file troupe reads: the one --config or
// $TROUPE_CONFIG names (which must exist), else the first default place
// that has one, else "".
func configPath(flagPath string) string {
	path, explicit := flagPath, flagPath != ""
	if !explicit {
		path, explicit = os.LookupEnv("TROUPE_CONFIG")
	}
	if explicit {
		return path
	}
	for _, p := range configCandidates() {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// loadConfig finds (configPath) and reads the config file.
func loadConfig(flagPath string) (*config, error) {
	path := configPath(flagPath)
	if path == "" {
		return &config{endpoints: llm.Endpoints{}, settings: map[string]any{}}, nil
	}
	data, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	return parseConfig(path, data)
}

func readConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("config file %s does not exist", path)
		}
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("config file %s is larger than %d bytes", path, maxConfigSize)
	}
	return data, nil
}

// parseConfig decodes a config file. troupe reads it itself rather than
// through viper: endpoint names hold dots and slashes (gpt-5.6, mock/x),
// which viper would split into nested keys, and viper would lower-case them.
func parseConfig(path string, data []byte) (*config, error) {
	root, err := yaml11.Parse(path, data)
	if err != nil {
		return nil, err
	}
	cfg := &config{path: path, endpoints: llm.Endpoints{}, settings: map[string]any{}}
	if yaml11.IsNull(root) { // an empty file configures nothing
		return cfg, nil
	}
	d := yaml11.Decoder{File: path}
	d.Struct(root, "", []yaml11.Field{
		{Name: "artifact_root", Decode: func(n *yaml11.Node, p string) {
			if s, ok := d.String(n, p); ok {
				if !filepath.IsAbs(s) {
					s = filepath.Join(filepath.Dir(path), s)
				}
				cfg.settings["artifact_root"] = s
			}
		}},
		{Name: "registry", Decode: func(n *yaml11.Node, p string) {
			if s, ok := d.String(n, p); ok {
				if !strings.Contains(s, "://") && !filepath.IsAbs(s) {
					s = filepath.Join(filepath.Dir(path), s)
				}
				cfg.settings["registry"] = s
			}
		}},
		{Name: "network", Decode: func(n *yaml11.Node, p string) {
			if s, ok := d.String(n, p); ok {
				cfg.settings["network"] = s
			}
		}},
		{Name: "services", Decode: func(n *yaml11.Node, p string) {
			if s, ok := d.String(n, p); ok {
				cfg.settings["services"] = s
			}
		}},
		{Name: "runtime", Decode: func(n *yaml11.Node, p string) {
			if s, ok := d.String(n, p); ok {
				cfg.settings["runtime"] = s
			}
		}},
		{Name: "allow_host_paths", Decode: func(n *yaml11.Node, p string) {
			cfg.hostPaths = parseHostPaths(&d, n, p, path)
		}},
		{Name: "kubernetes", Decode: func(n *yaml11.Node, p string) {
			d.Struct(n, p, kubernetesConfig(&d, cfg.settings, filepath.Dir(path)), nil)
		}},
		{Name: "stacks", Decode: func(n *yaml11.Node, p string) {
			cfg.stacks = stack.Parse(&d, n, p, filepath.Dir(path), path)
		}},
		{Name: "endpoints", Decode: func(n *yaml11.Node, p string) {
			cfg.endpoints = llm.ParseEndpoints(&d, n, p)
		}},
	}, nil)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return cfg, nil
}
