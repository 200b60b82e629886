package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/manifest"
)

type hashOptions struct {
	manifests []string
	canonical bool
}

func newHashCmd(a *app) *cobra.Command {
	var opts hashOptions
	cmd := &cobra.Command{
		Use:   "hash MANIFEST...",
		Short: "Print the condition hash of manifests",
		Long: `Print the condition hash: the sha256 of the manifest's canonical JSON, computed
exactly as the original Python system computed it, so results recorded by either
system pool under the same hash. Only the manifest is read, not its pinned files.

With one manifest the hash is printed alone; with several, one "HASH  FILE" line each.
--canonical prints the canonical JSON instead, to see what the hash covers.`,
		Example: `  troupe hash examples/manifests/team.yaml
  troupe hash --canonical examples/manifests/team.yaml | jq .`,
		Args: minArgs(1, "a manifest file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.manifests = args
			return runHash(a.stdout, a.stderr, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.canonical, "canonical", false, "print the canonical JSON the hash is computed over")
	return cmd
}

func runHash(out, errOut io.Writer, opts hashOptions) error {
	failed := false
	for _, path := range opts.manifests {
		m, err := manifest.Load(path)
		if err != nil {
			failed = true
			for _, p := range problems(path, err) {
				fmt.Fprintln(errOut, p)
			}
			continue
		}
		switch {
		case opts.canonical:
			fmt.Fprintf(out, "%s\n", m.Canonical())
		case len(opts.manifests) == 1:
			fmt.Fprintln(out, m.Hash())
		default:
			fmt.Fprintf(out, "%s  %s\n", m.Hash(), path)
		}
	}
	if failed {
		return &reportedError{code: exitFailed}
	}
	return nil
}
