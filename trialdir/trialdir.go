// Package trialdir is the format of a trial's folder where several
// packages meet: the names of the files they share and what those hold
// (the channel's transcript, written by the relay and read by replays,
// exports and the viewer; the roster of members.json, written by the
// trial and read by the same; the trial's result.json, written by the
// trial and read by the job, comparisons, the viewer, the ATIF export and
// replays). One package declares each, with one way to read it, so that
// a writer and its readers cannot differ on a field. It imports nothing
// of the trial's machinery (the gateway, the task loader, manifests), so
// that every reader can import it.
package trialdir

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/troupebench/troupe/channel"
)

// Files of a trial folder, relative to it, with slashes.
const (
	// Result is the trial's result (TrialResult), once it has ended.
	Result = "result.json"
	// Members is who holds which key (Member lines), from the trial's start.
	Members = "relay/members.json"
	// Transcript is every event the channel accepted (Line), in order.
	Transcript = "relay/transcript.jsonl"
	// Audit is what the relay refused, and why.
	Audit = "relay/audit.jsonl"
)

// Member is one member of a trial's roster, as members.json lists them:
// the trial user (id "user", kind "user") and each agent.
type Member struct {
	ID     string `json:"id"`
	Role   string `json:"role"`
	Kind   string `json:"kind"`
	Pubkey string `json:"pubkey"`
}

// WriteMembers writes a roster as members.json holds it.
func WriteMembers(w io.Writer, members []Member) error {
	data, err := json.MarshalIndent(members, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// ReadMembers reads members.json from r; its caller bounds r.
func ReadMembers(r io.Reader) ([]Member, error) {
	var members []Member
	if err := json.NewDecoder(r).Decode(&members); err != nil {
		return nil, fmt.Errorf("%s: %w", Members, err)
	}
	return members, nil
}

// Line is one line of the transcript: an accepted event as the relay
// received it, numbered in the channel's order.
type Line struct {
	Seq        int64           `json:"seq"`
	ReceivedAt time.Time       `json:"received_at"`
	Event      json.RawMessage `json:"event"`
}

// ParseLine reads one transcript line with its event. ok is false for a
// line that is not one (a marker where troupe bounded the file).
func ParseLine(data []byte) (l Line, ev nostr.Event, ok bool) {
	if json.Unmarshal(data, &l) != nil || len(l.Event) == 0 || json.Unmarshal(l.Event, &ev) != nil {
		return Line{}, nostr.Event{}, false
	}
	return l, ev, true
}

// ParseMessage is ParseLine for the channel's messages (channel.KindMessage)
// only: ok is false for any other line.
func ParseMessage(data []byte) (Line, nostr.Event, bool) {
	l, ev, ok := ParseLine(data)
	if !ok || ev.Kind != channel.KindMessage {
		return Line{}, nostr.Event{}, false
	}
	return l, ev, true
}

// Mentions are the pubkeys a message is for (its channel.TagMention tags),
// in order.
func Mentions(ev nostr.Event) []string {
	var out []string
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == channel.TagMention {
			out = append(out, tag[1])
		}
	}
	return out
}
