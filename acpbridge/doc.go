// Package acpbridge is `troupe acp`: a team member that hosts any Agent
// Client Protocol (ACP) agent, as the original system's buzz-acp bridge
// did. Goose, Codex (through codex-acp), Claude Code (through an ACP
// adapter), Gemini CLI (--experimental-acp) or any program speaking ACP
// over stdio takes part in a trial's channel through it.
//
// The bridge is the member; the ACP agent is its child. Inside the trial
// container, as the agent's uid, the bridge reads the stack contract
// (package stack), connects to the relay as the member (package member:
// the same client as troupe's reference agent, so one connection per
// identity: every channel action of the child goes through the bridge),
// starts the child over stdio, and speaks the client side of ACP to it:
//
//   - initialize (the client offers fs read/write and terminals), then
//     session/new with cwd = TROUPE_WORKDIR and the team tools as an MCP
//     server;
//   - each mention becomes a session/prompt: the channel's messages the
//     session has not seen yet as context, the mentioning message last,
//     and on the first turn the system prompt (TROUPE_SYSTEM_PROMPT_FILE).
//     Turns are serialised; session/cancel goes at the deadline and on
//     SIGTERM;
//   - fs/read_text_file, fs/write_text_file and terminal/* (create, output
//     bounded, wait_for_exit, kill, release) run as the agent's own uid in
//     the working folder; session/request_permission is answered by a
//     policy (TROUPE_ACP_PERMISSION: allow, the default, or deny);
//   - every session/update (text, thoughts, tool calls and their status,
//     plans, usage) is a JSON line in the bridge's log (standard error, the
//     agent's stderr.log in a trial);
//   - when a turn ends and the agent sent nothing itself, its final text is
//     posted to whoever mentioned it ("respond to anyone"), so an agent
//     that never calls a team tool still takes part;
//   - when the child exits or breaks the protocol (a line on its stdout
//     that is not a JSON-RPC message), the bridge reports it in the
//     channel and exits non-zero, quoting the child's last stderr lines.
//
// # Team tools over MCP, and why a socket
//
// The child gets three tools, send_message (content, mentions by id, role
// or "user", resolved from the member list as the reference agent does),
// read_channel and list_team, from an MCP server the bridge serves. The
// tools must act through the bridge's own relay connection, so the server
// lives in the bridge; the question is how the child reaches it. ACP lets
// a client offer MCP servers over stdio (which every agent must support),
// HTTP or SSE (only when the agent says so). The bridge offers a stdio
// server, `troupe mcp --socket PATH`: a small pipe that the child starts
// like any MCP server and that connects its stdin and stdout to a Unix
// socket the bridge listens on. The socket lives in a folder of mode 0700
// in the agent's HOME (a private folder of its uid in a trial), and the
// bridge also checks the peer's uid (SO_PEERCRED) on every connection:
// teammates, who run as other uids in the same container, cannot reach it.
// An HTTP server on loopback would work with agents that support HTTP
// only, and would need a secret in its URL, since every agent of the
// container shares loopback; a filesystem permission needs no secret and
// works with every agent.
package acpbridge
