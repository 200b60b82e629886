package oneshot

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/member"
	"github.com/troupebench/troupe/teamtools"
)

// turnInput is what one run's prompt is made of.
type turnInput struct {
	// Whole: the agent starts afresh (its first run, or an agent that
	// cannot resume): the persona and how the team works go with it.
	Whole    bool
	System   string // "" when the agent takes it from {system_file}
	Self     member.Participant
	Team     string // the team, described
	Tools    bool   // the agent has the team tools over MCP
	Context  string // the heading of Recent
	Recent   []string
	From     string
	Message  string
	TimeLeft time.Duration
	Workdir  string
}

// buildPrompt is one run's prompt: for an agent starting afresh the
// persona and a note on the team, then the channel's messages it has not
// seen (or, without a session to resume, the recent ones), then the
// message that woke it, last.
func buildPrompt(in turnInput) string {
	var parts []string
	if in.Whole {
		if s := strings.TrimSpace(in.System); s != "" {
			parts = append(parts, s)
		}
		note := fmt.Sprintf(sessionNote, in.Self.ID, in.Self.Role, in.Self.Kind, in.Team)
		if in.Tools {
			note += "\n" + toolsNote
		}
		if in.Self.Kind == "orchestrator" {
			note += "\n" + doneNote
		}
		parts = append(parts, note)
	}
	if len(in.Recent) > 0 {
		parts = append(parts, in.Context+"\n"+strings.Join(in.Recent, "\n"))
	}
	parts = append(parts, fmt.Sprintf("Time left before the deadline: %s. Working folder: %s.\n\nMessage for you from %s:\n%s",
		in.TimeLeft.Round(time.Second), in.Workdir, in.From, in.Message))
	return strings.Join(parts, "\n\n")
}

// The notes that tell the agent how it takes part.
const (
	sessionNote = `## How you take part

You are %s (role %s, %s) on a team that works through one chat channel. The team: %s.
Each message that mentions you starts you once, with a prompt like this one. What you
answer at the end is posted to whoever wrote to you; write @id or @role in it to wake
other teammates too.`
	toolsNote = `The MCP server "troupe-team" gives you the channel while you work: send_message (content,
and mentions: teammate ids, roles, or "user"), read_channel and list_team. If you send a
message yourself, your final answer is not posted.`
	doneNote = `You lead: when the task is complete, answer with a message that starts with DONE: and says
what was done. That ends the work.`
)

// Headings of the context a prompt carries.
const (
	unseenHeading = "Messages in the channel since you last heard from it, oldest first:"
	recentHeading = "Recent messages in the channel, oldest first:"
)

// recent returns the channel's last n messages before the trigger, the
// member's own among them (an agent without a session remembers nothing).
func recent(history []*nostr.Event, n int, trigger *nostr.Event, self string, name func(string) string) []string {
	var lines []string
	for _, ev := range history {
		if ev.ID == trigger.ID {
			break
		}
		l := teamtools.Line(ev, name)
		if ev.PubKey == self {
			l = "you, " + l
		}
		lines = append(lines, l)
	}
	return lines[max(0, len(lines)-n):]
}

// mentionRE finds "@name" in an answer: a teammate's id or role.
var mentionRE = regexp.MustCompile(`(?:^|[^\w@])@([A-Za-z0-9][\w.-]*)`)

// mentionsIn returns whom an answer addresses with @id or @role, among
// the team's members; a name that is no teammate's (an e-mail address, a
// decorator) is left alone.
func mentionsIn(text string, team *member.Team) []string {
	var out []string
	for _, m := range mentionRE.FindAllStringSubmatch(text, -1) {
		name := strings.TrimRight(m[1], ".-")
		if _, err := team.ResolveMentions([]string{name}); err == nil && !slices.ContainsFunc(out, func(s string) bool { return strings.EqualFold(s, name) }) {
			out = append(out, name)
		}
	}
	return out
}

// maxArgPrompt bounds a prompt passed as an argument ({prompt}): Linux
// refuses an argument over 128 KiB (MAX_ARG_STRLEN) with E2BIG, and a run
// that cannot start must not pass for an agent that cannot work.
const maxArgPrompt = 120 << 10

// fitArgument is in's prompt within maxArgPrompt bytes: the oldest channel
// messages left out first, then the message that woke the agent cut, then
// the whole cut, its end kept (where the message is).
func fitArgument(in turnInput) string {
	p := buildPrompt(in)
	for len(p) > maxArgPrompt && len(in.Recent) > 0 {
		in.Recent = in.Recent[1:]
		p = buildPrompt(in)
	}
	if over := len(p) - maxArgPrompt; over > 0 {
		in.Message = headBytes(in.Message, max(1000, len(in.Message)-over-len(cutMark))) + cutMark
		p = buildPrompt(in)
	}
	if len(p) > maxArgPrompt {
		p = cutMark + tailBytes(p, maxArgPrompt-len(cutMark))
	}
	return p
}

// cutMark marks where a prompt was cut to fit an argument.
const cutMark = " […cut to fit the command line…] "

// headBytes is s's first n bytes at most, cut after a whole character.
func headBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tailBytes is s's last n bytes at most, cut before a whole character.
func tailBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
