package acpbridge

import (
	"fmt"
	"strings"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/troupebench/troupe/member"
)

// turnInput is what one turn's prompt is made of.
type turnInput struct {
	// First is the session's first prompt: the system prompt and how the
	// session works go with it. The session keeps them afterwards.
	First    bool
	System   string
	Self     member.Participant
	Team     string   // the team, described
	Recent   []string // channel messages the session has not seen, oldest first
	From     string   // who mentioned the agent
	Message  string   // what they said
	TimeLeft time.Duration
	Workdir  string
}

// buildPrompt makes a turn's session/prompt: on the first turn the system
// prompt and how the team works, then the channel's messages the session
// has not seen, then the message that woke the agent, last.
func buildPrompt(in turnInput) []acp.ContentBlock {
	var blocks []acp.ContentBlock
	if in.First {
		if strings.TrimSpace(in.System) != "" {
			blocks = append(blocks, acp.TextBlock(in.System))
		}
		blocks = append(blocks, acp.TextBlock(fmt.Sprintf(sessionNote, in.Self.ID, in.Self.Role, in.Self.Kind, in.Team)))
	}
	if len(in.Recent) > 0 {
		blocks = append(blocks, acp.TextBlock("Messages in the channel since you last heard from it, oldest first:\n"+strings.Join(in.Recent, "\n")))
	}
	blocks = append(blocks, acp.TextBlock(fmt.Sprintf("Time left before the deadline: %s. Working folder: %s.\n\nMessage for you from %s:\n%s",
		in.TimeLeft.Round(time.Second), in.Workdir, in.From, in.Message)))
	return blocks
}

// sessionNote tells the agent how it takes part: its identity, its team,
// the team tools.
const sessionNote = `## This session

You are %s (role %s, %s) on a team that works through one chat channel. The team: %s.
Each message that mentions you reaches you as a prompt like this one. The MCP server
"troupe-team" gives you the channel: send_message (content, and mentions: teammate ids,
roles, or "user"; only mentioned teammates are woken), read_channel (recent messages) and
list_team. If you end your turn without sending a message, your final answer is posted to
whoever wrote to you.`

// answerFor is "respond to anyone": when a turn ended and the agent sent
// no message of its own, its final text goes to whoever mentioned it. A
// cancelled turn, or one without text, posts nothing.
func answerFor(sent bool, stop acp.StopReason, text string) (string, bool) {
	if sent || stop == acp.StopReasonCancelled || strings.TrimSpace(text) == "" {
		return "", false
	}
	return text, true
}
