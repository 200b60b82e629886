package trialdir

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// TestLines: a transcript line written as the relay writes it reads back
// with its event; a message is told from other kinds and from a bound's
// marker; the roster round-trips.
func TestLines(t *testing.T) {
	sk := nostr.GeneratePrivateKey()
	ev := nostr.Event{Kind: 9, CreatedAt: nostr.Now(), Content: "DONE: it works", Tags: nostr.Tags{{"h", "t1"}, {"p", "aa"}, {"p", "bb"}}}
	if err := ev.Sign(sk); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(ev)
	at := time.Date(2026, 12, 3, 10, 0, 0, 5, time.UTC)
	line, _ := json.Marshal(Line{Seq: 7, ReceivedAt: at, Event: raw})
	l, got, ok := ParseMessage(line)
	if !ok || l.Seq != 7 || !l.ReceivedAt.Equal(at) || got.ID != ev.ID || got.Content != ev.Content || !slices.Equal(Mentions(got), []string{"aa", "bb"}) {
		t.Fatalf("%v %+v %+v", ok, l, got)
	}
	if ok, _ := got.CheckSignature(); !ok {
		t.Error("the event read back does not verify")
	}
	meta, _ := json.Marshal(Line{Seq: 1, Event: json.RawMessage(`{"kind":39000,"content":"about"}`)})
	for _, tc := range []struct {
		name       string
		line       []byte
		line2, msg bool
	}{
		{"a message", line, true, true},
		{"another kind", meta, true, false},
		{"a bound's marker", []byte("[troupe: 1024 bytes dropped here]"), false, false},
		{"no event", []byte(`{"seq":3}`), false, false},
		{"an event that is not one", []byte(`{"seq":3,"event":"x"}`), false, false},
	} {
		_, _, isLine := ParseLine(tc.line)
		_, _, isMsg := ParseMessage(tc.line)
		if isLine != tc.line2 || isMsg != tc.msg {
			t.Errorf("%s: line %v, message %v", tc.name, isLine, isMsg)
		}
	}

	roster := []Member{{ID: "user", Role: "user", Kind: "user", Pubkey: "aa"}, {ID: "lead-1", Role: "lead", Kind: "orchestrator", Pubkey: "bb"}}
	var buf bytes.Buffer
	if err := WriteMembers(&buf, roster); err != nil {
		t.Fatal(err)
	}
	back, err := ReadMembers(&buf)
	if err != nil || !slices.Equal(back, roster) {
		t.Errorf("%v %+v", err, back)
	}
	if _, err := ReadMembers(strings.NewReader(`{"id":"x"}`)); err == nil || !strings.Contains(err.Error(), Members) {
		t.Errorf("a roster that is not a list: %v", err)
	}
}

// FuzzParseLine: no line of a transcript, however written, makes the
// reader panic; a message it reads is of the message kind.
func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"seq":1,"received_at":"2026-12-03T10:00:00Z","event":{"kind":9,"content":"hi","tags":[["p","aa"]]}}`))
	f.Add([]byte(`{"seq":1,"event":{"kind":"9"}}`))
	f.Add([]byte(`[troupe: cut]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseLine(data)
		if _, ev, ok := ParseMessage(data); ok && ev.Kind != 9 {
			t.Fatalf("a message of kind %d", ev.Kind)
		}
	})
}
