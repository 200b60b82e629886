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
	"github.com/troupebench/troupe/stack"
)

type stacksPinOptions struct {
	name         string
	manifestPath string
	check        bool
	// configPath is troupe's config file, "" when there is none.
	configPath string
}

func newStacksPinCmd(a *app) *cobra.Command {
	var opts stacksPinOptions
	cmd := &cobra.Command{
		Use:   "pin NAME",
		Short: "Set a stack's sha256 pins from its files on disk",
		Long: `Rewrite the sha256 of each of a stack's files and of its install script to the digest
of the file or folder as it is now (what troupe hash --file prints), in the file that
defines the stack: troupe's config file, and with --manifest M, stacks.yaml beside M.
Comments, quoting, order and layout stay; a missing sha256 is added beside its path.
Use it after rebuilding an agent instead of hand-editing digests. Each change is
printed, old -> new, with the pin's place; when nothing changed, it says so.

Nothing is written when a file or folder of the stack does not exist (the message says
what its relative path was resolved against: the folder of the file that defines the
stack), nor for the built-in reference agent, which has no files. With --check nothing
is written at all: stale or missing pins are listed and the exit status is 1 if there
are any, which suits CI.

Exit status: 0 when the pins are current (or were made so), 1 when they could not be
or --check found some stale, 2 for a usage error.`,
		Example: `  troupe stacks pin goose
  troupe stacks pin my-agent --manifest manifests/team.yaml
  troupe stacks pin --check my-agent --manifest manifests/team.yaml`,
		Args: exactArgs(1, "a stack's name (troupe stacks list shows them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.name, opts.configPath = args[0], configPath(a.configFlag)
			return runStacksPin(a.stdout, opts)
		},
	}
	stacksManifestFlag(cmd, &opts.manifestPath)
	cmd.Flags().BoolVar(&opts.check, "check", false, "write nothing; exit 1 when a pin is stale or missing")
	return cmd
}

// stacksFile is a file that may define stacks: how to read it, and how
// to decode all of it (its stacks then checked).
type stacksFile struct {
	path  string
	read  func(path string) ([]byte, error)
	parse func(path string, data []byte) (stack.Set, error)
}

// readIfExists reads a file that may be missing, as nothing.
func readIfExists(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

func runStacksPin(out io.Writer, opts stacksPinOptions) error {
	if opts.name == stack.Builtin || opts.name == stack.BuzzAgent {
		return fmt.Errorf("%s is troupe's built-in reference agent, troupe's own binary: it has no files to pin", opts.name)
	}
	var files []stacksFile
	if opts.configPath != "" {
		files = append(files, stacksFile{opts.configPath, readConfig, func(path string, data []byte) (stack.Set, error) {
			cfg, err := parseConfig(path, data)
			if err != nil {
				return nil, err
			}
			return cfg.stacks, nil
		}})
	}
	if opts.manifestPath != "" {
		files = append(files, stacksFile{filepath.Join(filepath.Dir(opts.manifestPath), stack.FileName), readIfExists, stack.ParseFile})
	}
	defined, failed := false, false
	for _, f := range files {
		found, err := pinStackIn(out, f, opts)
		defined = defined || found
		if err != nil {
			failed = true
			for _, p := range problems(f.path, err) {
				fmt.Fprintf(out, "  %s\n", p)
			}
		}
	}
	switch {
	case failed:
		return &reportedError{code: exitFailed}
	case !defined:
		var where []string
		for _, f := range files {
			where = append(where, f.path)
		}
		if len(where) == 0 {
			return fmt.Errorf("stack %s is not defined: no config file was found, and without --manifest no stacks.yaml is read", opts.name)
		}
		return fmt.Errorf("stack %s is defined in neither %s (troupe stacks list shows what is defined)", opts.name, strings.Join(where, " nor "))
	}
	return nil
}

// pinStackIn repins stack opts.name in one file, if the file defines it
// (found), and shows what changed; then it checks the stack as it now
// is, whose files must match their new pins.
func pinStackIn(out io.Writer, f stacksFile, opts stacksPinOptions) (found bool, err error) {
	data, err := f.read(f.path)
	if err != nil {
		return false, err
	}
	updated, changes, err := stack.Repin(f.path, data, opts.name)
	switch {
	case errors.Is(err, stack.ErrNotDefined):
		return false, nil
	case err != nil:
		fmt.Fprintf(out, "FAIL  %s\n", f.path)
		return true, err
	}
	printPinChanges(out, f.path, changes, opts.check)
	switch {
	case len(changes) == 0:
		fmt.Fprintf(out, "ok    %s  every pin of stack %s is current\n", f.path, opts.name)
	case opts.check:
		return true, fmt.Errorf("stack %s: pins are stale; run troupe stacks pin %s to update them", opts.name, opts.name)
	default:
		info, err := os.Stat(f.path)
		if err != nil {
			return true, err
		}
		if err := writeFileAtomic(f.path, updated, info.Mode().Perm()); err != nil {
			return true, err
		}
	}
	// Pins are current now; anything still wrong with the stack is shown.
	set, err := f.parse(f.path, updated)
	if err != nil {
		return true, err
	}
	if st, ok := set[opts.name]; ok {
		_, err = st.Verify()
	}
	return true, err
}
