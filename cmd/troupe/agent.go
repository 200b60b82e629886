package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/agent"
)

func newAgentCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "Run troupe's reference agent: a team member on the relay, with shell and file tools",
		Long: `Run troupe's reference agent. troupe starts one per roster member inside each trial
container; you run it by hand only to develop or debug a team.

Everything comes from the stack contract (docs/stacks.md), never from flags:
  TROUPE_RELAY_URL           the relay's websocket URL
  TROUPE_PRIVATE_KEY_FILE    a file holding this agent's Nostr secret key (hex)
  TROUPE_LLM_TOKEN_FILE      a file holding this agent's gateway token
  TROUPE_CHANNEL             the trial channel's id
  TROUPE_LLM_BASE_URL        an OpenAI-compatible base URL (…/v1)
  TROUPE_MODEL               the model name sent with each call
  TROUPE_SYSTEM_PROMPT_FILE  the composed persona prompt
  TROUPE_MAX_ROUNDS          model calls per turn (0 or unset: 40)
  TROUPE_DEADLINE            RFC 3339 time; the agent stops 2s before it
  TROUPE_WORKDIR             the folder its tools work in
  TROUPE_AGENT_ID            optional: its name in the logs

The agent authenticates to the relay (NIP-42), reads the channel's member list, and
takes a turn each time a message mentions it: the model sees its prompt, the time
left, recent channel history and the message, and calls the tools shell, read_file,
write_file, list_dir and send_message until it answers without a tool call. Only
send_message reaches the channel; the orchestrator ends the trial with a message
starting "DONE:". Logs are JSON lines on standard error. SIGTERM ends it promptly,
with every shell command it started.`,
		Example: `  TROUPE_RELAY_URL=ws://127.0.0.1:7447 TROUPE_CHANNEL=dev ... troupe agent`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return agent.Main(cmd.Context(), os.Getenv, a.raw.stderr)
		},
	}
}
