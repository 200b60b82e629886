package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/stack"
)

func newStacksCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stacks",
		Short: "The agent programs team members run: what is defined, and whether it can run",
		Long: `A stack is a program that can be a team member: the files troupe uploads into each
trial container (each pinned by sha256), the command that starts one agent, and which of
the stack contract's values its agent reads under which names. A manifest's harness names
the stack each agent runs: buzz-agent (the default) and troupe-agent are troupe's built-in
reference agent; any other stack is defined under stacks: in the config file, or in
stacks.yaml beside the manifest (docs/stacks.md). After a rebuild, troupe stacks pin NAME
sets the stack's sha256 pins from its files.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newStacksListCmd(a), newStacksShowCmd(a), newStacksCheckCmd(a), newStacksPinCmd(a))
	return cmd
}

// stacksManifestFlag adds --manifest: its stacks.yaml joins the config's.
func stacksManifestFlag(cmd *cobra.Command, into *string) {
	cmd.Flags().StringVar(into, "manifest", "", "also the stacks of stacks.yaml beside this manifest")
}

// knownStacks are the built-in stack, the config's and, with a manifest,
// those beside it.
func (a *app) knownStacks(manifestPath string) (stack.Set, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	set := cfg.stacks
	if manifestPath != "" {
		if set, err = stacksFor(cfg, manifestPath); err != nil {
			return nil, err
		}
	}
	builtin, _ := stack.Set{}.Resolve(stack.Builtin)
	out := stack.Set{stack.Builtin: builtin}
	maps.Copy(out, set)
	return out, nil
}

func newStacksListCmd(a *app) *cobra.Command {
	var manifestPath string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the stacks: the built-in reference agent and those defined",
		Example: "  troupe stacks list\n  troupe stacks list --manifest manifests/goose.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := a.knownStacks(manifestPath)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tFILES\tDIGEST\tDEFINED IN")
			for _, name := range slices.Sorted(maps.Keys(set)) {
				st := set[name]
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", name, len(st.Files), st.Digest()[:len("sha256:")+12], st.Source)
			}
			return tw.Flush()
		},
	}
	stacksManifestFlag(cmd, &manifestPath)
	return cmd
}

func newStacksShowCmd(a *app) *cobra.Command {
	var manifestPath string
	cmd := &cobra.Command{
		Use:     "show NAME",
		Short:   "Show a stack's definition: files, command, environment, digest",
		Example: "  troupe stacks show goose",
		Args:    minArgs(1, "a stack's name (troupe stacks list shows them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.stackNamed(manifestPath, args[0])
			if err != nil {
				return err
			}
			showStack(a.stdout, st)
			return nil
		},
	}
	stacksManifestFlag(cmd, &manifestPath)
	return cmd
}

func (a *app) stackNamed(manifestPath, name string) (*stack.Stack, error) {
	set, err := a.knownStacks(manifestPath)
	if err != nil {
		return nil, err
	}
	return set.Resolve(name)
}

func showStack(w io.Writer, st *stack.Stack) {
	fmt.Fprintf(w, "stack %s\n  defined in: %s\n  digest:     %s\n  command:    %s\n", st.Name, st.Source, st.Digest(), strings.Join(st.Command, " "))
	for _, f := range st.Files {
		fmt.Fprintf(w, "  file:       %s -> %s (mode %04o, %s)\n", f.Path, f.To, uint32(f.Mode.Perm()), f.SHA256)
	}
	for _, k := range slices.Sorted(maps.Keys(st.Env)) {
		fmt.Fprintf(w, "  env:        %s = the contract's %s\n", k, st.Env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(st.FixedEnv)) {
		fmt.Fprintf(w, "  fixed env:  %s=%s\n", k, st.FixedEnv[k])
	}
	if in := st.Install; in != nil {
		timeout := st.InstallTimeout
		if timeout == 0 {
			timeout = stack.DefaultInstallTimeout
		}
		fmt.Fprintf(w, "  install:    %s (%s), as %s, within %s; cached per task image\n", in.Path, in.SHA256, cmp.Or(st.InstallUser, "root"), timeout)
	}
}

func newStacksCheckCmd(a *app) *cobra.Command {
	var manifestPath string
	cmd := &cobra.Command{
		Use:   "check NAME",
		Short: "Check that a stack can run: its files exist and match their digests, fit linux/amd64, and hold its command",
		Long: `Check a stack as troupe run would before any container starts, and more: every file
exists and matches its pinned sha256, every ELF program among them is built for x86-64
(trial containers are linux/amd64), and the command is in the upload (or, when it is not,
says that it must be in every task image the stack runs in).

Exit status: 0 when the stack can run, 1 when it cannot, 2 for a usage error.`,
		Example: "  troupe stacks check goose\n  troupe stacks check my-agent --manifest manifests/team.yaml",
		Args:    minArgs(1, "a stack's name (troupe stacks list shows them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.stackNamed(manifestPath, args[0])
			if err != nil {
				return err
			}
			return checkStack(a.stdout, st)
		},
	}
	stacksManifestFlag(cmd, &manifestPath)
	return cmd
}

// checkStack reports what troupe stacks check finds, and fails when the
// stack cannot run.
func checkStack(w io.Writer, st *stack.Stack) error {
	files, err := st.Verify()
	if err != nil {
		return err
	}
	notes, err := st.CheckPrograms(files)
	for _, n := range notes {
		if n.Checked {
			fmt.Fprintf(w, "ok    %s\n", n.Text)
		} else {
			fmt.Fprintf(w, "note  %s\n", n.Text)
		}
	}
	if err != nil {
		return fmt.Errorf("stack %s cannot run:\n%w", st.Name, err)
	}
	fmt.Fprintf(w, "ok    %d files match their digests; stack %s can run (%s)\n", len(st.Files), st.Name, st.Digest())
	return nil
}
