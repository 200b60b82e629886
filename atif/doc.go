// Package atif writes a trial's agents as trajectories in Harbor's Agent
// Trajectory Interchange Format (ATIF), so Harbor's tools (its viewer, its
// trajectory validators, SFT and RL exporters) read troupe's trials.
//
// The types follow Harbor's pydantic models (src/harbor/models/trajectories,
// unchanged since Harbor commit 0533a59c, read at 2922220bf78b; schema
// ATIF-v1.7): each model's required fields are plain fields, its optional
// ones pointers or omitempty. Package atiftest checks documents against them.
//
// Trial reads a trial folder and returns one trajectory per agent that has
// a conversation record (agents/<id>/llm-conversation.jsonl.gz, kept by
// troupe run --record full) and one for the team channel
// (relay/transcript.jsonl). FromConversation and FromTranscript build them
// from what was read; Write stores them, one JSON file each.
//
// An agent's trajectory rebuilds the dialogue from the requests the agent
// sent: each request carries the history again, so what a request adds to
// what earlier requests carried is the new input (a user or system message
// becomes a step of that source; a tool result becomes an observation of
// the agent step whose tool call it answers), and each model call becomes
// one agent step with its answer's text, tool calls and metrics.
package atif
