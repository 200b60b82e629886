package atif

import (
	"bufio"
	"fmt"
	"io"

	"github.com/troupebench/troupe/trialdir"
)

// Member is one member of relay/members.json: who holds which key.
type Member = trialdir.Member

// maxTranscriptLine bounds one line of a transcript.
const maxTranscriptLine = 16 << 20

// FromTranscript builds the team channel's trajectory from
// relay/transcript.jsonl: each message (a kind 9 event) is a step, the
// trial user's of source user and the agents' of source agent, its author
// and the members it mentions named in extra. A line that is not an event
// (a marker where troupe cut the transcript) is skipped. A channel without
// messages gets one system step that says so, as ATIF wants at least one.
func FromTranscript(r io.Reader, members []Member, version string) (Trajectory, error) {
	byKey := map[string]Member{}
	for _, m := range members {
		byKey[m.Pubkey] = m
	}
	name := func(pk string) string {
		if m, ok := byKey[pk]; ok {
			return m.ID
		}
		return "unknown key " + pk
	}
	var steps []Step
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxTranscriptLine)
	for sc.Scan() {
		rec, ev, ok := trialdir.ParseMessage(sc.Bytes())
		if !ok {
			continue
		}
		m, known := byKey[ev.PubKey]
		source := SourceAgent
		if m.Kind == "user" {
			source = SourceUser
		}
		x := map[string]any{"author": name(ev.PubKey), "event_id": ev.ID, "seq": rec.Seq}
		if known {
			x["role"], x["kind"] = m.Role, m.Kind
		}
		var to []string
		for _, pk := range trialdir.Mentions(ev) {
			to = append(to, name(pk))
		}
		if len(to) > 0 {
			x["mentions"] = to
		}
		steps = append(steps, Step{StepID: len(steps) + 1, Timestamp: stamp(rec.ReceivedAt), Source: source, Message: ev.Content, Extra: x})
	}
	if err := sc.Err(); err != nil {
		return Trajectory{}, fmt.Errorf("read the transcript: %w", err)
	}
	notes := "The team channel's messages (relay/transcript.jsonl, kind 9 events) in the order the relay received them: the trial user's are user steps, the agents' agent steps; extra.author names who sent each, extra.mentions whom it woke. Each agent's own trajectory is <id>.json beside this file."
	if len(steps) == 0 {
		steps = []Step{{StepID: 1, Source: SourceSystem, Message: "The team channel carried no messages."}}
	}
	var roster []map[string]string
	for _, m := range members {
		roster = append(roster, map[string]string{"id": m.ID, "role": m.Role, "kind": m.Kind, "pubkey": m.Pubkey})
	}
	return Trajectory{
		SchemaVersion: SchemaVersion,
		TrajectoryID:  "team",
		Agent:         Agent{Name: "team", Version: orDash(version), Extra: map[string]any{"members": roster}},
		Steps:         steps,
		Notes:         notes,
		FinalMetrics:  &FinalMetrics{TotalSteps: ptr(len(steps))},
	}, nil
}
