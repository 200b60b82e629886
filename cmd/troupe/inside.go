package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/runtime/tunnel"
)

// The subcommands troupe runs inside trial containers. They are hidden from
// --help: a user never runs them on the host.

func newInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "init",
		Short:  "Run as a trial container's PID 1: reap orphans, exit on SIGTERM",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return inside.Init(cmd.Context())
		},
	}
}

func newSweepCmd(a *app) *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "End every process in the container but PID 1 and the tunnel; print JSON",
		Long: `Send TERM to every process in the container except PID 1, the tunnel and the sweep
itself, wait up to --grace for them to exit, KILL what is left (and anything started
meanwhile), and print a JSON report: which processes were signalled, which needed KILL,
and which survived even that.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := inside.Sweep(cmd.Context(), grace, func(p inside.Proc) bool { return inside.IsTroupe(p, "tunnel") })
			if err != nil {
				return err
			}
			return json.NewEncoder(a.stdout).Encode(rep)
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 5*time.Second, "how long processes get to exit after TERM")
	return cmd
}

func newTunnelCmd() *cobra.Command {
	var listens []string
	cmd := &cobra.Command{
		Use:   "tunnel",
		Short: "The container end of the tunnel, over standard input and output",
		Long: `Listen on each --listen ADDR=NAME inside the container and carry every connection to
the host over standard input and output, multiplexed, where troupe dials the target
named NAME (relay, llm). Standard output carries the tunnel: nothing else may print to it.

The host also calls it through the same stream, saving an exec each: "prepare"
unpacks a tar of the agents' files at / and shares the working folder between the
agents' uids; "sweep" does what troupe sweep does and answers its JSON report.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ls []tunnel.Listen
			for _, s := range listens {
				l, err := tunnel.ParseListen(s)
				if err != nil {
					return &usageError{command: cmd.CommandPath(), err: err}
				}
				ls = append(ls, l)
			}
			return tunnel.Container(cmd.Context(), tunnel.Stdio{In: os.Stdin, Out: os.Stdout}, ls, tunnelCalls)
		},
	}
	cmd.Flags().StringArrayVar(&listens, "listen", nil, "ADDR=NAME to listen on and the host target it reaches (repeat)")
	return cmd
}

// tunnelCalls are what the host may ask of the tunnel, which runs as root
// for as long as the trial does.
var tunnelCalls = map[string]tunnel.Handler{
	// prepare: arg {"share": DIR, "gid": N}; in: a tar of files to unpack at /.
	"prepare": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		var opts struct {
			Share string `json:"share"`
			GID   int    `json:"gid"`
		}
		if err := json.Unmarshal([]byte(arg), &opts); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		if err := inside.Unpack(in, "/"); err != nil {
			return err
		}
		if opts.Share == "" {
			return nil
		}
		return inside.Share(opts.Share, opts.GID)
	},
	// sweep: arg the grace period; out: the JSON report. The tunnel spares
	// itself (it is the sweeping process) and PID 1.
	"sweep": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		grace, err := time.ParseDuration(arg)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		rep, err := inside.Sweep(ctx, grace, nil)
		if err != nil {
			return err
		}
		return json.NewEncoder(out).Encode(rep)
	},
}
