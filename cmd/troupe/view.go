package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/report"
)

func newViewCmd(a *app) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "view DIR",
		Short: "Browse jobs, comparisons and trials in a local web UI",
		Long: `Serve a read-only web UI over the job folders under DIR (troupe run's --out, or a
folder of jobs): the condition comparison with its charts first, against the baseline
you choose on the page (/?baseline=NAME, kept in the page's links), then the jobs and
their trials, and each trial's page: the channel transcript as a timeline (who spoke,
whom they mentioned, the DONE: that ended the trial and any DONE: that was ignored),
every agent's model calls with tokens and cost, the agents' logs and the verifier's
output, with a notice wherever troupe cut a file it wrote. A result that cannot be
read is named on the page. Pages of a running job refresh every 5 seconds.

It listens on 127.0.0.1 unless --addr says otherwise, and serves nothing but pages
built from the results: no file browsing, no writes, no external assets. It answers
only requests addressed to localhost or to the address it listens on, so a web page
in your browser cannot read your results through a rebound DNS name.`,
		Example: `  troupe view jobs/tb2
  troupe view jobs --addr 127.0.0.1:8080`,
		Args: exactArgs(1, "one folder of results"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runView(cmd.Context(), a.stdout, args[0], addr)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:7480", "address to listen on (port 0 picks a free one)")
	return cmd
}

// viewHosts are the Host names the viewer answers to besides localhost: the
// host --addr named and the address it listens on, or any name when it
// listens on every interface (the user chose to serve other machines).
func viewHosts(flag string, addr net.Addr) []string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.IsUnspecified() {
		return []string{"*"}
	}
	hosts := []string{tcp.IP.String()}
	if h, _, err := net.SplitHostPort(flag); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	return hosts
}

func runView(ctx context.Context, out io.Writer, dir, addr string) error {
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return fmt.Errorf("%s is not a folder of results: give troupe run's --out folder", dir)
	}
	if _, err := report.Load(dir); err != nil {
		// A job that has just started has no result yet: serve anyway.
		fmt.Fprintf(out, "note: %v\n", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: &report.Viewer{Dir: dir, Hosts: viewHosts(addr, ln.Addr())},
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	fmt.Fprintf(out, "troupe view: http://%s/ (Ctrl+C to stop)\n", ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
