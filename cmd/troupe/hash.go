package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/stack"
)

type hashOptions struct {
	paths     []string
	canonical bool
	// file takes every file as a stack's file, a .yaml one too.
	file bool
}

func newHashCmd(a *app) *cobra.Command {
	var opts hashOptions
	cmd := &cobra.Command{
		Use:   "hash PATH...",
		Short: "Print a manifest's condition hash, or the digest a stack pins for a file or folder",
		Long: `Print a digest; which one depends on what PATH is:

  a manifest (a file named *.yaml or *.yml)
      its condition hash: the sha256 of the manifest's canonical JSON, computed exactly
      as the original Python system computed it, so results recorded by either system
      pool under the same hash; 64 hex digits. Only the manifest is read, not its
      pinned files.
  a folder
      the digest a stack pins for it (files: in a stack, docs/stacks.md): troupe's
      folder digest, over every entry's path, mode and content, as sha256:<64 hex>.
  any other file, or any file with --file
      the digest a stack pins for it: sha256:<64 hex> of its bytes, read as a stream,
      whatever its size.

Use --file for a stack's YAML file (a config the stack uploads, an install script
named .yml): without it, it is read as a manifest. The two kinds never mix up: a
condition hash has no sha256: prefix. troupe stacks pin NAME writes a stack's digests
into its definition for you.

With one PATH the digest is printed alone; with several, one "DIGEST  PATH" line each.
--canonical prints a manifest's canonical JSON instead, to see what the hash covers.`,
		Example: `  troupe hash examples/manifests/team.yaml
  troupe hash --canonical examples/manifests/team.yaml | jq .
  troupe hash dist/my-agent.tar.gz dist/my-agent/
  troupe hash --file dist/agent-config.yaml`,
		Args: minArgs(1, "a manifest, or a file or folder a stack pins"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.paths = args
			if opts.canonical && opts.file {
				return &usageError{command: cmd.CommandPath(), err: errors.New("--canonical shows a manifest's canonical JSON, and --file takes no file as a manifest: give one of them")}
			}
			return runHash(a.stdout, a.stderr, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.canonical, "canonical", false, "print the canonical JSON the condition hash is computed over")
	cmd.Flags().BoolVar(&opts.file, "file", false, "print the digest a stack pins for every file, a *.yaml or *.yml one too (never a condition hash)")
	return cmd
}

func runHash(out, errOut io.Writer, opts hashOptions) error {
	failed := false
	for _, path := range opts.paths {
		digest, isManifest, err := hashOne(path, opts)
		if err != nil {
			failed = true
			for _, p := range problems(path, err) {
				fmt.Fprintln(errOut, p)
			}
			if isManifest {
				fmt.Fprintf(errOut, "(%s was read as a manifest, as its name ends in .yaml or .yml; troupe hash --file %s prints the digest a stack pins for it)\n", path, path)
			}
			continue
		}
		switch {
		case opts.canonical, len(opts.paths) == 1:
			fmt.Fprintln(out, digest)
		default:
			fmt.Fprintf(out, "%s  %s\n", digest, path)
		}
	}
	if failed {
		return &reportedError{code: exitFailed}
	}
	return nil
}

// hashOne is what troupe hash prints for one path (see its help), and
// whether it read the path as a manifest.
func hashOne(path string, opts hashOptions) (digest string, isManifest bool, err error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, errors.New("does not exist")
	case err != nil:
		return "", false, err
	case info.IsDir() || opts.file || !manifestName(path):
		if opts.canonical {
			return "", false, errors.New("is not a manifest (a *.yaml or *.yml file): --canonical shows a manifest's canonical JSON")
		}
		digest, err := stack.HostDigest(path)
		return digest, false, err
	}
	m, err := manifest.Load(path)
	switch {
	case err != nil:
		return "", true, err
	case opts.canonical:
		return string(m.Canonical()), true, nil
	}
	return m.Hash(), true, nil
}

// manifestName reports whether troupe hash reads a file as a manifest:
// its name ends in .yaml or .yml.
func manifestName(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".yaml" || ext == ".yml"
}
