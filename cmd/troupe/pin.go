package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/internal/yamlpin"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/personas"
)

type pinOptions struct {
	manifests    []string
	check        bool
	artifactRoot string
}

func newPinCmd(a *app) *cobra.Command {
	var opts pinOptions
	cmd := &cobra.Command{
		Use:   "pin MANIFEST...",
		Short: "Set the sha256 pins of manifests from the files on disk",
		Long: `Rewrite the sha256 of every pinned file (prompt, persona, skills) to the digest of
the file as it is now, keeping comments, quoting and layout; a missing sha256 is added
beside its path. Use it after editing a persona instead of hand-editing digests.

With --check nothing is written: stale or missing pins are listed and the exit status
is 1 if there are any, which suits CI.

Pinned paths are relative to the artifact root: --artifact-root, $TROUPE_ARTIFACT_ROOT,
artifact_root in the config file, or else the manifest's own folder.`,
		Example: `  troupe pin examples/manifests/team.yaml
  troupe pin --check manifests/*.yaml`,
		Args: minArgs(1, "at least one manifest file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.manifests = args
			root, _, err := a.artifactRoot(cmd)
			if err != nil {
				return err
			}
			opts.artifactRoot = root
			return runPin(a.stdout, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.check, "check", false, "write nothing; exit 1 when a pin is stale or missing")
	artifactRootFlag(cmd)
	return cmd
}

func runPin(out io.Writer, opts pinOptions) error {
	failed := false
	for _, path := range opts.manifests {
		if err := pinOne(out, path, opts); err != nil {
			failed = true
			for _, p := range problems(path, err) {
				fmt.Fprintf(out, "  %s\n", p)
			}
		}
	}
	if failed {
		return &reportedError{code: exitFailed}
	}
	return nil
}

// errStale marks a manifest whose pins --check found out of date.
var errStale = errors.New("pins are stale; run troupe pin to update them")

func pinOne(out io.Writer, path string, opts pinOptions) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	data, err := manifest.ReadFile(path)
	if err != nil {
		return err
	}
	dir := opts.artifactRoot
	if dir == "" {
		dir = manifest.DefaultDir(path)
	}
	src := manifest.Sources{Dir: dir, Builtin: personas.FS()}
	updated, changes, err := manifest.Repin(path, data, src)
	if err != nil {
		fmt.Fprintf(out, "FAIL  %s\n", path)
		return err
	}
	printPinChanges(out, path, changes, opts.check)
	switch {
	case len(changes) == 0:
		fmt.Fprintf(out, "ok    %s  every pin is current\n", path)
	case opts.check:
		return errStale
	default:
		if err := writeFileAtomic(path, updated, info.Mode().Perm()); err != nil {
			return err
		}
	}
	// Pins are current now; anything still wrong with the manifest is shown.
	m, err := manifest.Parse(path, updated)
	if err == nil {
		_, err = m.Verify(src)
	}
	return err
}

// printPinChanges prints each pin a rewrite changes in file, old -> new;
// check says they are stale rather than updated.
func printPinChanges(out io.Writer, file string, changes []yamlpin.Change, check bool) {
	verb := "updated"
	if check {
		verb = "stale"
	}
	for _, c := range changes {
		old := cmp.Or(c.Old, "(none)")
		fmt.Fprintf(out, "%s  %s:%d:%d: %s (%s): %s -> %s\n", verb, file, c.Line, c.Col, c.Key, c.Path, old, c.New)
	}
}

// writeFileAtomic replaces path with data so that a reader sees the old file
// or the new one, never a part: a temporary file beside it, synced, renamed.
func writeFileAtomic(path string, data []byte, mode os.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, removeIfExists(tmp.Name()))
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove temporary file: %w", err)
	}
	return nil
}
