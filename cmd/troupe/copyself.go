package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/troupebench/troupe/runtime/inside"
)

func newCopySelfCmd(a *app) *cobra.Command {
	var linkDown bool
	cmd := &cobra.Command{
		Use:   "copy-self DEST [--link-down]",
		Short: "Copy this troupe binary to DEST, executable, atomically",
		Long: `Copy the running troupe executable to DEST with mode 0755, creating DEST's folder. The
copy is written under a temporary name in DEST's folder and renamed, so a process
never sees half a binary at DEST. It is the init container's command in troupe's
binary image (FROM scratch, no cp): troupe copy-self /opt/troupe/bin/troupe.

--link-down then does what troupe link down does, for a pod that starts offline: one
init container prepares the pod, where two would cost it about a second more (the
kubelet notices each init container's end on its next relist).`,
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("copy-self: find the running troupe: %w", err)
			}
			if err := copyExecutable(self, args[0]); err != nil || !linkDown {
				return err
			}
			routes, err := inside.LinkDown()
			return errors.Join(err, printRoutes(a.raw.stdout, inside.TerminationLog, routes))
		},
	}
	cmd.Flags().BoolVar(&linkDown, "link-down", false, "then set every non-loopback interface down, as troupe link down")
	return cmd
}

// copyExecutable copies src to dst with mode 0755 by way of a temporary
// file in dst's folder and a rename.
func copyExecutable(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy-self: %w", err)
	}
	defer in.Close()
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("copy-self: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return fmt.Errorf("copy-self: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	_, err = io.Copy(tmp, in)
	if err == nil {
		// CreateTemp makes it 0600; the umask plays no part in Chmod.
		err = tmp.Chmod(0o755)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return fmt.Errorf("copy-self to %s: %w", dst, err)
	}
	return nil
}
