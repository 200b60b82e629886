package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/personas"
)

func newPersonasCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "personas",
		Short: "List and show troupe's built-in personas",
		Long: `troupe ships persona prompts for common team shapes. A manifest uses one with
prompt: {path: "troupe:NAME", sha256: DIGEST}; troupe pin fills in the digest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the built-in personas with their digests",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPersonasList(a.stdout)
		},
	}, &cobra.Command{
		Use:     "show NAME",
		Short:   "Print a built-in persona's text",
		Example: "  troupe personas show lead",
		Args:    exactArgs(1, "one persona name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := personas.Get(args[0])
			if err != nil {
				return err
			}
			_, err = a.raw.stdout.Write(p.Text) // the persona as pinned, to be saved
			return err
		},
	})
	return cmd
}

func runPersonasList(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSUMMARY\tPIN")
	for _, p := range personas.List() {
		fmt.Fprintf(tw, "%s\t%s\t{path: \"%s%s\", sha256: %s}\n", p.Name, p.Summary, manifest.BuiltinPrefix, p.Name, p.SHA256)
	}
	return tw.Flush()
}
