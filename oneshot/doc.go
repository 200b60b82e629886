// Package oneshot is `troupe cli`: a team member that hosts a one-shot
// command-line agent, one that takes a prompt, works, prints its answer
// and exits (crush run, codex exec, claude -p, goose run, gemini -p, or a
// program of your own), without glue written for it.
//
// The bridge is the member; the agent runs once per mention. Inside the
// trial container, as the agent's uid, the bridge reads the stack
// contract, checks that the agent can start (its program found on the
// agent's PATH or at its path, executable, of this machine's
// architecture, and a --probe run exiting 0) and only then joins the
// channel, so that a member whose agent cannot start is never ready: the
// trial ends as an infrastructure error quoting the bridge's error.
//
// Each message that mentions the member is one run of the command line,
// whose placeholders stand for the turn: {prompt} (the prompt as an
// argument), {prompt_file} (a file holding it; with neither, the prompt
// goes on standard input), {system_file} (the persona's file, for an
// agent that takes a system prompt apart; else the persona opens the
// prompt), {mcp_config} and {mcp_command} (the team tools, below),
// {workdir}, and {resume}: the --resume arguments on a run that continues
// the agent's session, nothing on its first. An agent that cannot resume
// is re-sent the persona, the team and the channel's recent messages on
// every run (--history).
//
// What the run prints on standard output is its answer, posted to whoever
// mentioned the member, and to every teammate the answer names with @id or
// @role, unless the agent sent a message itself with the team tools. The
// orchestrator's answer that starts with DONE: ends the trial, as any
// message of its does. A run that fails is reported to whoever asked; a
// failed first run ends the member with contract.ExitCannotWork: the agent
// never worked, which is not the team's failure.
//
// The team tools (package teamtools) are served on a private Unix socket
// and reach the agent as any stdio MCP server: {mcp_config} is a file in
// the common {"mcpServers": {...}} form (claude --mcp-config, gemini, and
// others read it), {mcp_command} the server's command line (goose
// --with-extension). Each run's standard error is logged line by line, and
// whatever the run left behind in its process group is killed when it
// ends.
package oneshot
