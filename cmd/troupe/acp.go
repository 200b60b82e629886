package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/acpbridge"
	"github.com/troupebench/troupe/oneshot"
	"github.com/troupebench/troupe/teamtools"
)

func newACPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acp -- COMMAND [ARGS...]",
		Short: "Run an Agent Client Protocol (ACP) agent as a team member: troupe's ACP bridge",
		Long: `Run an ACP agent (Goose, codex-acp, Claude Code through an ACP adapter, Gemini CLI
with --experimental-acp, or any program that speaks ACP over stdio) as a team member.
A stack's command runs it inside the trial container, as the agent's user:

  command: [/opt/troupe/bin/troupe, acp, --, /opt/my-agent/bin/agent, --acp]

The bridge reads the stack contract (docs/stacks.md) like troupe agent, connects to the
relay as the member, and starts COMMAND as its child over stdio: initialize, then
session/new in TROUPE_WORKDIR with the team tools (send_message, read_channel,
list_team) as an MCP server. Each mention becomes a session/prompt: the system prompt
on the first turn, the channel's messages the session has not seen, and the message,
last. The child's fs/* and terminal/* requests run as the agent's user in the working
folder; permission requests are allowed, or denied with TROUPE_ACP_PERMISSION=deny.
When a turn ends and the agent sent nothing, its final text goes to whoever mentioned
it. Every session/update is a JSON line on standard error. At the deadline and on
SIGTERM the bridge sends session/cancel and ends the child; when the child exits or
breaks the protocol first, the bridge says so in the channel and exits 1.`,
		Example: `  TROUPE_RELAY_URL=ws://127.0.0.1:7447 TROUPE_CHANNEL=dev ... troupe acp -- goose acp`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return acpbridge.Main(cmd.Context(), os.Getenv, args, shortVersion(), a.raw.stderr)
		},
	}
	// troupe acp goose acp --with-flags: the agent's flags are its own.
	cmd.Flags().SetInterspersed(false)
	return cmd
}

func newMCPCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "mcp --socket PATH",
		Short: "The team tools as a stdio MCP server (started by the agent of troupe acp or troupe cli)",
		Long: `Connect standard input and output to the MCP server of team tools that troupe acp
or troupe cli serves on a Unix socket. They give their agent this command as an MCP
server; a user never runs it.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return teamtools.Pipe(cmd.Context(), socket, os.Stdin, os.Stdout)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the bridge's socket")
	cmd.MarkFlagRequired("socket")
	return cmd
}

func newCLICmd(a *app) *cobra.Command {
	var flags oneshot.Flags
	cmd := &cobra.Command{
		Use:   "cli [FLAGS] -- COMMAND [ARGS...]",
		Short: "Run a one-shot command-line agent (crush run, codex exec, claude -p, …) as a team member",
		Long: `Run an agent that takes one prompt per process (crush run, codex exec, claude -p,
goose run, gemini -p, or a program of your own) as a team member, without glue written
for it. A stack's command runs it inside the trial container, as the agent's user:

  command: [/opt/troupe/bin/troupe, cli, --probe=--version, --, /opt/my-agent/bin/agent, run, "{prompt}"]

The bridge reads the stack contract (docs/stacks.md), checks that the program exists,
is executable and built for this machine, runs the --probe arguments if given (they
must exit 0), and only then joins the channel as the member. Each mention runs
COMMAND once, in TROUPE_WORKDIR; these placeholders in its arguments stand for the run:

  {prompt}        the prompt, as an argument (with neither this nor {prompt_file},
                  the prompt goes on standard input)
  {prompt_file}   a file holding the prompt, readable by the agent alone
  {system_file}   the persona's file; the prompt then leaves the persona out
  {mcp_config}    a JSON file {"mcpServers": {"troupe-team": {...}}}: the team tools
  {mcp_command}   the team tools' stdio MCP server as one shell-quoted line
  {workdir}       the working folder
  {resume}        the --resume arguments on a run that continues the agent's
                  session; nothing on its first run

The first prompt carries the persona, who the member is and its team, and the
message; with --resume later prompts carry only what the channel said since; without
it every prompt carries the persona and the last --history messages. What the run
prints on standard output is posted to whoever mentioned the member and to every
teammate it names as @id or @role, unless the agent sent a message itself through
the team tools; the orchestrator's answer starting DONE: ends the trial. A failed run
is reported to whoever asked; when the first run fails, or the agent cannot start,
the bridge exits 78 and the trial ends as unscored_infra, quoting the agent's error.`,
		Example: `  troupe cli --probe=--version -- claude -p --mcp-config "{mcp_config}" "{prompt}"
  troupe cli --resume=--continue -- claude -p {resume} "{prompt}"
  troupe cli --resume=resume --resume=--last -- codex exec {resume} "{prompt}"
  troupe cli --history 20 -- my-agent --task-file "{prompt_file}"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return oneshot.Main(cmd.Context(), os.Getenv, args, flags, shortVersion(), a.raw.stderr)
		},
	}
	cmd.Flags().StringArrayVar(&flags.Resume, "resume", nil, "an argument that {resume} stands for on a run continuing the session (repeat for several)")
	cmd.Flags().IntVar(&flags.History, "history", 0, "without --resume: how many recent channel messages each prompt carries (default 40)")
	cmd.Flags().StringArrayVar(&flags.Probe, "probe", nil, "an argument of a run that must exit 0 before the member joins (repeat for several), e.g. --probe=--version")
	cmd.Flags().DurationVar(&flags.ProbeTimeout, "probe-timeout", oneshot.DefaultProbeTimeout, "how long the probe may take")
	// troupe cli -- crush run --quiet: the agent's flags are its own.
	cmd.Flags().SetInterspersed(false)
	return cmd
}
