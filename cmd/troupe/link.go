package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/runtime/inside"
)

func newLinkCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "link",
		Short: "Cut a pod's network namespace off (down) and restore it (up)",
		Long: `Set every non-loopback interface of the network namespace down, or back up with its
routes. It runs with NET_ADMIN in a container that shares a trial pod's network
namespace but not its filesystem (an init or ephemeral container): the trial's own
container has no NET_ADMIN and cannot undo it, so a pod without internet is cut off
even where the cluster's network plugin ignores NetworkPolicy.

Both print the routes as one line of JSON on standard output, and write the same
line to /dev/termination-log when it exists and may be written (Kubernetes shows it
as the container's termination message):
  {"routes":[{"interface":"eth0","destination":"0.0.0.0","gateway":"172.18.0.1",
              "mask":"0.0.0.0","flags":3,"metric":0}]}
down prints the routes it took away ({"routes":[]} when everything was down
already); up prints the routes the interfaces have once it is done.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newLinkDownCmd(a), newLinkUpCmd(a))
	return cmd
}

func newLinkDownCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Set every non-loopback interface down; print the routes it took away",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			routes, err := inside.LinkDown()
			// Printed even when an interface failed to go down: they are
			// what link up needs to restore the ones that did.
			return errors.Join(err, printRoutes(a.raw.stdout, inside.TerminationLog, routes))
		},
	}
}

func newLinkUpCmd(a *app) *cobra.Command {
	var routesJSON string
	cmd := &cobra.Command{
		Use:   "up --routes JSON",
		Short: "Set the interfaces up and add back the routes link down printed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var want inside.Routes
			if err := json.Unmarshal([]byte(routesJSON), &want); err != nil {
				return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--routes: %w", err)}
			}
			routes, err := inside.LinkUp(want)
			if err != nil {
				return err
			}
			return printRoutes(a.raw.stdout, inside.TerminationLog, routes)
		},
	}
	cmd.Flags().StringVar(&routesJSON, "routes", `{"routes":[]}`, "the JSON troupe link down printed")
	return cmd
}

// printRoutes writes routes as one line of JSON to w and to the
// termination log at logPath, when there is one.
func printRoutes(w io.Writer, logPath string, routes inside.Routes) error {
	line, err := json.Marshal(routes)
	if err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	line = append(line, '\n')
	if _, err := w.Write(line); err != nil {
		return fmt.Errorf("print the routes: %w", err)
	}
	return inside.WriteTerminationMessage(logPath, line)
}
