package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/acpbridge"
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
		Short: "The ACP bridge's team tools as a stdio MCP server (started by the bridge's agent)",
		Long: `Connect standard input and output to the MCP server of team tools that troupe acp
serves on a Unix socket. troupe acp gives its agent this command as an MCP server; a
user never runs it.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return acpbridge.Pipe(cmd.Context(), socket, os.Stdin, os.Stdout)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the bridge's socket")
	cmd.MarkFlagRequired("socket")
	return cmd
}
