// Package channel holds the team channel's conventions: the kinds of its
// events, its tags, and the prefix of the message that ends a trial. The
// relay, the members' client, the agents and every reader of a transcript
// spell them from here, and it depends on nothing, so in-container code
// and the host cannot drift apart on what a message or a DONE: is.
package channel

import "strings"

// The kinds of event a trial channel carries.
const (
	KindProfile  = 0
	KindMessage  = 9
	KindMetadata = 39000
	KindMembers  = 39002
)

// Tags of a channel message.
const (
	// TagChannel names the channel (NIP-29's h).
	TagChannel = "h"
	// TagMention names a member the message is for, by pubkey.
	TagMention = "p"
	// TagForeignSender marks a message a member's bridge sent for a
	// process that was not its own agent's (with agents sharing a uid, as
	// root, another agent can use a member's MCP socket): its value says
	// what the bridge knew of that process.
	TagForeignSender = "troupe_foreign_sender"
)

// DonePrefix starts the orchestrator's message that ends a trial.
const DonePrefix = "DONE:"

// IsDone says whether a message's content declares the task done.
func IsDone(content string) bool { return strings.HasPrefix(content, DonePrefix) }
