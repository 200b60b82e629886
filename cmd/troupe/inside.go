package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/runtime/fence"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/runtime/tunnel"
)

// The subcommands troupe runs inside trial containers. They are hidden from
// --help: a user never runs them on the host.

func newInitCmd() *cobra.Command {
	var mainJSON string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Run as a trial container's PID 1: start the image's entrypoint, reap orphans, exit on SIGTERM",
		Long: `Run as a trial container's PID 1: reap every orphan, and exit on SIGTERM. With --main
'{"cmd": [...], "user": U, "workdir": W}' (the image's ENTRYPOINT and command, as Harbor
runs them), start that first, as a child run as the image's user in its working folder,
its output kept in ` + inside.MainLog + ` and its end in ` + inside.MainStatusFile + `.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var main *inside.Main
			if mainJSON != "" {
				main = new(inside.Main)
				if err := json.Unmarshal([]byte(mainJSON), main); err != nil {
					return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--main: %w", err)}
				}
			}
			return inside.Init(cmd.Context(), main)
		},
	}
	cmd.Flags().StringVar(&mainJSON, "main", "", "the image's own first process, as JSON {cmd, user, workdir}")
	return cmd
}

func newFenceCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "fence",
		Short: "Install the nftables table that keeps trial networks from the host",
		Long: `Install (or replace) the nftables table "inet troupe" in this network namespace: traffic
from a trial bridge (an interface named trp…) to the host itself is refused but for DNS
and replies to the host's own connections, and trial bridges' traffic to link-local
addresses is not forwarded. The Docker backend runs it in a helper container in the
host's network namespace with NET_ADMIN, before a trial first gets a network.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fence.Install(-1)
		},
	}
}

func newSweepCmd(a *app) *cobra.Command {
	var grace time.Duration
	var list, service bool
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "End every process in the container but PID 1; print JSON",
		Long: `Send TERM to every process in the container except PID 1 (troupe init) and the sweep
itself, wait up to --grace for them to exit, then KILL every process of the container at
once (kill -1, which no fork can escape), and print a JSON report: which processes were
signalled, which needed KILL, and which survived even that. It refuses to run unless
PID 1 is troupe init: on a host it would end every process the user may signal.

In a task's compose service, whose first process is the service's own: --list prints the
processes there now (the baseline, taken before the agents start), and --service reads a
baseline on standard input and ends every process not in it: TERM, --grace, then STOP to
every process at once, KILL to each newcomer, CONT to every process; the service runs on.
Both refuse to run on a host or in a trial container.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := inside.Undumpable(); err != nil {
				return err
			}
			var v any
			var err error
			switch {
			case list && service:
				return &usageError{command: cmd.CommandPath(), err: errors.New("--list and --service are two steps: give one")}
			case list:
				v, err = inside.ListService()
			case service:
				var base inside.Baseline
				if err := json.NewDecoder(io.LimitReader(cmd.InOrStdin(), 1<<20)).Decode(&base); err != nil {
					return fmt.Errorf("sweep --service: read the baseline: %w", err)
				}
				v, err = inside.SweepService(cmd.Context(), base, grace)
			default:
				v, err = inside.Sweep(cmd.Context(), inside.SweepSpec{Grace: grace})
			}
			if err != nil {
				return err
			}
			return json.NewEncoder(a.raw.stdout).Encode(v)
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 5*time.Second, "how long processes get to exit after TERM")
	cmd.Flags().BoolVar(&list, "list", false, "in a compose service: list its processes, the baseline --service spares")
	cmd.Flags().BoolVar(&service, "service", false, "in a compose service: end every process not in the baseline on standard input")
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
agents' uids; "sweep" does what troupe sweep does and answers its JSON report;
"reset" empties folders for the verifier and unpacks its tests; "user" looks a user up
in the container's /etc/passwd; "pack" answers a tar of a file or folder, as Docker's
archive API does (troupe call runs the same calls in an exec, when the tunnel is gone).`,
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
			if err := inside.Undumpable(); err != nil {
				return err
			}
			return tunnel.Container(cmd.Context(), tunnel.Duplex{In: os.Stdin, Out: os.Stdout}, ls, tunnelCalls)
		},
	}
	cmd.Flags().StringArrayVar(&listens, "listen", nil, "ADDR=NAME to listen on and the host target it reaches (repeat)")
	return cmd
}

func newCallCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "call NAME [ARG]",
		Short: "Run one of the tunnel's calls (prepare, sweep, reset, user, pack) in an exec",
		Long: `Run one of the calls the host makes through the tunnel, with its input on standard
input and its answer on standard output: the way the host reaches troupe's in-container
code when the tunnel has ended (an agent running as root may have killed it).`,
		Hidden: true,
		Args:   cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := inside.Undumpable(); err != nil {
				return err
			}
			h, ok := tunnelCalls[args[0]]
			if !ok {
				return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("no call %q", args[0])}
			}
			arg := ""
			if len(args) == 2 {
				arg = args[1]
			}
			return h(cmd.Context(), arg, os.Stdin, a.raw.stdout)
		},
	}
}

// tunnelCalls are what the host may ask of the tunnel, which runs as root
// for as long as the trial does (or of troupe call, in an exec).
var tunnelCalls = map[string]tunnel.Handler{
	// prepare: arg {"share": DIR, "gid": N, "copies": [{src, dst, uid, gid}]};
	// in: a tar of files to unpack at /; out: what the copies left out.
	"prepare": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		var opts inside.Prepare
		if err := json.Unmarshal([]byte(arg), &opts); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		if err := inside.Unpack(in, "/"); err != nil {
			return err
		}
		// What a copy left out is printed, one line each, for the trial's
		// log.
		for _, c := range opts.Copies {
			skipped, err := inside.CopyTree(c)
			if err != nil {
				return err
			}
			for _, s := range skipped {
				fmt.Fprintf(out, "copy %s to %s: left out %s\n", c.Src, c.Dst, s)
			}
		}
		if opts.Share == "" {
			return nil
		}
		return inside.Share(opts.Share, opts.GID)
	},
	// sweep: arg the grace period, or an inside.SweepSpec as JSON (the
	// agents' uids, or the baseline to spare; keep); out: the JSON report.
	// The tunnel is the sweeping process: it is spared with PID 1.
	"sweep": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		var spec inside.SweepSpec
		if strings.HasPrefix(arg, "{") {
			if err := json.Unmarshal([]byte(arg), &spec); err != nil {
				return fmt.Errorf("sweep: %w", err)
			}
		} else {
			grace, err := time.ParseDuration(arg)
			if err != nil {
				return fmt.Errorf("sweep: %w", err)
			}
			spec.Grace = grace
		}
		rep, err := inside.Sweep(ctx, spec)
		if err != nil {
			return err
		}
		return json.NewEncoder(out).Encode(rep)
	},
	// baseline: out: the trial container's processes now, by pid and
	// start time (inside.ListTrial): what a sweep with it spares.
	"baseline": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		b, err := inside.ListTrial()
		if err != nil {
			return err
		}
		return json.NewEncoder(out).Encode(b)
	},
	// entrypoint: out: JSON {"status": the image's entrypoint's status as
	// troupe init recorded it (null when it started none), "log": its
	// output}.
	"entrypoint": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		st, err := inside.ReadMainStatus()
		if err != nil {
			return err
		}
		var log []byte
		if st != nil {
			if log, err = inside.ReadMainLog(); err != nil {
				return err
			}
		}
		return json.NewEncoder(out).Encode(map[string]any{"status": st, "log": log})
	},
	// user: arg a user as an image or task names it ("agent", "1000",
	// "app:staff"); out: JSON {"name", "uid", "gid"} from the container's
	// own /etc/passwd and /etc/group.
	"user": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		u, err := inside.LookupUser(arg)
		if err != nil {
			return err
		}
		return json.NewEncoder(out).Encode(u)
	},
	// pack: arg an absolute path; out: a tar stream of it as Docker's GET
	// /containers/{id}/archive gives it (inside.Pack), for a backend that
	// has no such API to copy files out with.
	"pack": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		return inside.Pack(out, arg)
	},
	// shadows: arg a JSON list of files new in the container; out: a JSON
	// list of those that shadow a command of the same name (inside.Shadows).
	"shadows": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		var added []string
		if err := json.Unmarshal([]byte(arg), &added); err != nil {
			return fmt.Errorf("shadows: %w", err)
		}
		return json.NewEncoder(out).Encode(inside.Shadows(added, inside.CommandDirs))
	},
	// pack-as: arg {"src": PATH, "as": [{"uid": N, "gids": [N…]}…]}; out: a
	// tar of what one of those identities could read there (inside.PackAs).
	"pack-as": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		var opts struct {
			Src string        `json:"src"`
			As  []inside.Cred `json:"as"`
		}
		if err := json.Unmarshal([]byte(arg), &opts); err != nil {
			return fmt.Errorf("pack-as: %w", err)
		}
		return inside.PackAs(out, opts.Src, opts.As)
	},
	// reset: arg a JSON list of {"dir", "uid", "gid", "mode"}; in: a tar to
	// unpack at / afterwards. Each folder is emptied and given to its owner,
	// whatever was there (inside.Reset); out: JSON {"removed": [...]}.
	"reset": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
		var dirs []struct {
			Dir  string      `json:"dir"`
			UID  int         `json:"uid"`
			GID  int         `json:"gid"`
			Mode fs.FileMode `json:"mode"`
		}
		if err := json.Unmarshal([]byte(arg), &dirs); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
		removed := []string{}
		for _, d := range dirs {
			gone, err := inside.Reset(d.Dir, d.UID, d.GID, d.Mode.Perm())
			removed = append(removed, gone...)
			if err != nil {
				return err
			}
		}
		if err := inside.Unpack(in, "/"); err != nil {
			return err
		}
		return json.NewEncoder(out).Encode(map[string]any{"removed": removed})
	},
}
