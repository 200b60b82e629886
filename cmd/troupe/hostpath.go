package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/trial"
)

// hostPathFlag adds --allow-host-path, which run and tasks check share.
func hostPathFlag(cmd *cobra.Command) {
	cmd.Flags().StringArray("allow-host-path", nil, "a host folder or file that tasks' compose files may bind (it and what is under it), read-only; PATH:rw lets them write there (repeat for more; replaces the config file's allow_host_paths)")
}

// hostPaths resolves the host paths tasks may bind: --allow-host-path
// when given, else the config file's allow_host_paths. There is no
// environment variable: a path is as much a grant as a flag.
func (a *app) hostPaths(cmd *cobra.Command) (trial.HostPaths, error) {
	cfg, err := a.config()
	if err != nil {
		return trial.HostPaths{}, err
	}
	given, from := cfg.hostPaths, "allow_host_paths in "+cfg.path
	if f := cmd.Flags().Lookup("allow-host-path"); f != nil && f.Changed {
		given, _ = cmd.Flags().GetStringArray("allow-host-path")
		from = "--allow-host-path"
	}
	if len(given) == 0 {
		return trial.HostPaths{}, nil
	}
	usage := func(err error) error { return &usageError{command: cmd.CommandPath(), err: err} }
	v, err := a.settings(cmd, "runtime")
	if err != nil {
		return trial.HostPaths{}, err
	}
	if v.GetString("runtime") == "kubernetes" {
		return trial.HostPaths{}, usage(fmt.Errorf("%s: the kubernetes runtime binds no host path (a pod runs on a node, not on this host): run tasks that bind host paths with --runtime docker", from))
	}
	var rules []trial.HostPathRule
	for _, s := range given {
		r, err := trial.ParseHostPathRule(s)
		if err != nil {
			return trial.HostPaths{}, usage(fmt.Errorf("%s: %w", from, err))
		}
		rules = append(rules, r)
	}
	h, err := trial.NewHostPaths(rules, dockerSocket())
	if err != nil {
		return trial.HostPaths{}, usage(err)
	}
	return h, nil
}

// dockerSocket is the engine's socket DOCKER_HOST names, "" when it names
// none (the usual sockets are protected anyway).
func dockerSocket() string {
	if s, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		return s
	}
	return ""
}

// parseHostPaths reads the config file's allow_host_paths: a list of
// PATH or PATH:rw, relative paths taken from the file's folder.
func parseHostPaths(d *yaml11.Decoder, n *yaml11.Node, p, file string) []string {
	var out []string
	d.Seq(n, p, func(n *yaml11.Node, p string) {
		if s, ok := d.String(n, p); ok {
			if !filepath.IsAbs(s) && s != "" {
				s = filepath.Join(filepath.Dir(file), s)
			}
			out = append(out, s)
		}
	})
	return out
}
