package member

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func TestResolveMentions(t *testing.T) {
	tm := &Team{Members: []Participant{
		{Pubkey: strings.Repeat("a", 64), ID: "lead-1", Role: "lead", Kind: "orchestrator"},
		{Pubkey: strings.Repeat("b", 64), ID: "worker-1", Role: "implementer", Kind: "worker"},
		{Pubkey: strings.Repeat("c", 64), ID: "worker-2", Role: "implementer", Kind: "worker"},
		{Pubkey: strings.Repeat("d", 64), ID: "user", Role: "user", Kind: "user"},
	}}
	a, b, c, d := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64), strings.Repeat("d", 64)
	for _, tc := range []struct {
		names []string
		want  []string
		err   string
	}{
		{names: []string{"lead-1"}, want: []string{a}},
		{names: []string{"@Worker-1", " lead "}, want: []string{b, a}},
		{names: []string{"implementer"}, want: []string{b, c}},
		{names: []string{"user"}, want: []string{d}},
		{names: []string{"worker-1", "implementer"}, want: []string{b, c}},
		{names: []string{c}, want: []string{c}},
		{names: nil, want: nil},
		{names: []string{"nobody", "lead", "ghost"}, err: "unknown teammate nobody, ghost; mention ids or roles of the team: lead-1 (lead), worker-1 (implementer), worker-2 (implementer), user (user)"},
		{names: []string{strings.Repeat("e", 64)}, err: "unknown teammate"},
	} {
		got, err := tm.ResolveMentions(tc.names)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.names, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v: %v, %v; want %v", tc.names, got, err, tc.want)
		}
	}
}

// FuzzRelayMessage: whatever the relay sends, the client's reader sorts it
// without panicking, delivers events only to live subscriptions, and answers
// a waiting request at most once.
func FuzzRelayMessage(f *testing.F) {
	ev := nostr.Event{Kind: 9, Content: "hi", CreatedAt: 1}
	evJSON, _ := json.Marshal(ev)
	for _, s := range []string{
		`["AUTH","challenge"]`, `["OK","e1",true,""]`, `["OK","e1",false,"restricted: no"]`,
		`["EVENT","s1",` + string(evJSON) + `]`, `["EOSE","s1"]`, `["EOSE","s1"]`, `["CLOSED","s1","auth-required: who"]`,
		`["NOTICE","x"]`, `[]`, `{}`, `["EVENT","s1",null]`, `["OK",1,2,3]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &relayConn{gotAUTH: make(chan struct{}), oks: map[string]chan string{}, subs: map[string]*subscription{}}
		ok := make(chan string, 1)
		r.oks["e1"] = ok
		s := &subscription{id: "s1", events: make(chan *nostr.Event, 1), eose: make(chan struct{}), closed: make(chan string, 1)}
		r.subs["s1"] = s
		for range 2 { // twice: a repeated message must be harmless too
			sub, got := r.handle(data)
			if got != nil && sub != s {
				t.Fatalf("an event for an unknown subscription was delivered")
			}
			if got != nil && s.ended {
				t.Fatalf("an event for an ended subscription was delivered")
			}
		}
	})
}
