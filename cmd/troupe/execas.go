package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/runtime/inside"
)

func newExecAsCmd(a *app) *cobra.Command {
	var x inside.ExecAs
	var envStdin bool
	cmd := &cobra.Command{
		Use:   "exec-as [--user U] [--workdir W] [--env K=V]... -- CMD [ARGS...]",
		Short: "Become CMD, run as docker exec --user --workdir --env would run it",
		Long: `Run CMD as a user, in a working folder, with environment variables, the way docker
exec --user U --workdir W --env K=V does, by becoming it: troupe exec-as replaces
itself with CMD, whose pid, signals and exit status are then CMD's own. A backend whose
exec cannot set these per exec (Kubernetes) execs troupe exec-as as root instead.

--user is a name or uid with an optional :group (a name or gid), from the container's
/etc/passwd and /etc/group; the supplementary groups are those of /etc/group that list
the user's name, none when --user is empty or gives a :group (as with docker exec). --env overrides or adds to the exec's own environment; HOME is the
user's home from /etc/passwd ("/" when none) unless --env sets it. CMD without a slash
is looked up in the PATH of that environment. Everything after -- is CMD's.
--env-stdin takes the variables from standard input instead, so that keys and tokens
are never in a command line (/proc/PID/cmdline is readable by every user) or in the
exec request's URL; what follows them on standard input is CMD's.

When CMD cannot be started, the reason is on standard error as "troupe exec-as: ..."
and the exit status is 127 when CMD was not found ("CMD: not found"), 126 for any
other reason (a file that is not executable, a missing working folder or user, a bad
flag), as a shell and docker exec say.`,
		Hidden: true,
		Args:   cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			x.Cmd = args
			if envStdin {
				env, err := inside.ReadEnvPreamble(os.Stdin)
				if err != nil {
					return execAsFailed(a.raw.stderr, &inside.ExecAsError{Code: inside.ExitNotExecutable, Err: err})
				}
				x.Env = append(x.Env, env...)
			}
			return execAsFailed(a.raw.stderr, x.Exec())
		},
	}
	// CMD's own flags are CMD's: parsing stops at the first argument that
	// is not exec-as's flag, as well as at --.
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&x.User, "user", "", "user to run as: name or uid, with an optional :group (default root)")
	cmd.Flags().StringVar(&x.WorkDir, "workdir", "", "working folder (default the exec's own)")
	cmd.Flags().StringArrayVar(&x.Env, "env", nil, "K=V to set in CMD's environment (repeat)")
	cmd.Flags().BoolVar(&x.Subreaper, "subreaper", false, "make CMD a child subreaper: its orphaned descendants are reparented to it, as to a container's PID 1 (troupe init starts an image's entrypoint so)")
	cmd.Flags().BoolVar(&envStdin, "env-stdin", false, "read more K=V from standard input first: a decimal length, a newline, a JSON array of that many bytes (no secret in the command line); the rest of the input is CMD's")
	// A bad flag is a failure to start CMD too: any status but 126 and 127
	// would be taken for CMD's own.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return execAsFailed(a.raw.stderr, &inside.ExecAsError{Code: inside.ExitNotExecutable, Err: err})
	})
	return cmd
}

// execAsFailed says on standard error why exec-as did not become its
// command, in the words a backend classifies, and ends with the status
// that goes with them.
func execAsFailed(stderr io.Writer, err error) error {
	code := inside.ExitNotExecutable
	if ee, ok := errors.AsType[*inside.ExecAsError](err); ok {
		code = ee.Code
	}
	fmt.Fprintf(stderr, "%s exec-as: %v\n", programName, err)
	return &reportedError{code: code}
}
