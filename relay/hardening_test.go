package relay

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/internal/syncbuf"
)

// Tags are stored with the content: they have limits too.
func TestTagLimits(t *testing.T) {
	tr := newTrial(t, 0, nil)
	c := dial(t, tr.r.URL())
	login(t, c, tr.orch)
	var many []nostr.Tag
	for i := range 300 {
		many = append(many, nostr.Tag{"t", fmt.Sprint(i)})
	}
	if r := c.Publish(message(t, tr.orch, "x", many...)); !strings.Contains(r, "301 tags; the limit is 256") {
		t.Errorf("300 extra tags: %q", r)
	}
	if r := c.Publish(message(t, tr.orch, "x", nostr.Tag{"t", strings.Repeat("y", 17<<10)})); !strings.Contains(r, "the limit is 16384") {
		t.Errorf("17 KiB of tags: %q", r)
	}
	if n := tr.ch.Stats().Events; n != 0 {
		t.Errorf("%d events stored", n)
	}
}

// A member that subscribes late gets the newest stored messages and its
// EOSE, never a replay bigger than its queue that disconnects it.
func TestLateSubscriberIsNotDisconnected(t *testing.T) {
	tr := newTrial(t, 1, func(r *Relay) { r.SendQueue = 64 })
	ctx := ctxTimeout(t, 10e9)
	for i := range 100 {
		if _, err := tr.ch.Post(ctx, fmt.Sprint("m ", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The raw client: go-nostr's stops reading a subscription's EOSE
	// while its events wait unread, which is not what is tested here.
	c := dialRaw(t, tr.r.URL())
	t.Cleanup(c.Close)
	login(t, c, tr.workers[0])
	got := query(t, c, channelFilter[0])
	if len(got) != 32 || got[len(got)-1].Content != "m 99" {
		t.Fatalf("replayed %d events, the last %q; want the newest 32", len(got), got[len(got)-1].Content)
	}
}

// What an unauthenticated client claims, or an AUTH whose signature fails,
// proves nothing about a member: it stays out of the channel's audit log
// and its refusal count.
func TestUnprovenClaimsStayOutOfTheChannel(t *testing.T) {
	tr := newTrial(t, 1, nil)
	raw := dialRaw(t, tr.r.URL()).(*rawClient)
	t.Cleanup(raw.Close)
	forged := message(t, tr.workers[0], "DONE: fake")
	forged.PubKey = tr.orch.pk
	if _, reason := raw.publish("EVENT", forged); !strings.HasPrefix(reason, PrefixAuthRequired) {
		t.Fatalf("EVENT before AUTH: %q", reason)
	}
	badAuth := nostr.Event{Kind: nostr.KindClientAuthentication, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"relay", tr.r.URL()}, {"challenge", "x"}}}
	badAuth.Sign(tr.workers[0].sk)
	badAuth.Sig = strings.Repeat("0", 128)
	for range 5 {
		if ok, reason := raw.publish("AUTH", badAuth); ok || !strings.Contains(reason, "signature") {
			t.Fatalf("a bad AUTH: %v %q", ok, reason)
		}
	}
	if n := tr.ch.Stats().Refusals; n != 0 {
		t.Errorf("%d refusals counted against the channel", n)
	}
	if err := tr.r.CloseChannel("trial-1"); err != nil {
		t.Fatal(err)
	}
	if lines := readLines(t, tr.audit); len(lines) != 0 {
		t.Errorf("the channel's audit log holds unproven entries: %v", lines)
	}
}

// A REQ's filters are bounded: each is checked against every event.
func TestFilterLimits(t *testing.T) {
	tr := newTrial(t, 0, nil)
	c := dial(t, tr.r.URL())
	login(t, c, tr.orch)
	var eleven nostr.Filters
	for range 11 {
		eleven = append(eleven, channelFilter[0])
	}
	if reason := <-c.Subscribe(eleven).Closed; !strings.Contains(reason, "1 to 10 filters") {
		t.Errorf("11 filters: %q", reason)
	}
	f := channelFilter[0]
	for i := range 1001 {
		f.Authors = append(f.Authors, fmt.Sprintf("%064x", i))
	}
	if reason := <-c.Subscribe(nostr.Filters{f}).Closed; !strings.Contains(reason, "the limit is 1000") {
		t.Errorf("1001 authors: %q", reason)
	}
}

// TestUnauthenticatedConnectionsGiveWay: connections that upgrade and never
// authenticate fill the relay; members connecting then still get in (the
// oldest of them make room, and the audit log says so), and a relay full of
// authenticated connections refuses with its reason.
func TestUnauthenticatedConnectionsGiveWay(t *testing.T) {
	var audit syncbuf.Buffer
	tr := newTrial(t, 1, func(r *Relay) { r.maxConns, r.maxUnauth, r.Audit = 8, 6, &audit })
	var idle []*websocket.Conn
	for range 8 {
		ws, _, err := websocket.Dial(ctxTimeout(t, 5*time.Second), tr.r.URL(), nil)
		if err != nil {
			t.Fatalf("connection %d: %v", len(idle)+1, err)
		}
		t.Cleanup(func() { ws.CloseNow() })
		idle = append(idle, ws)
	}
	// Six may be unauthenticated at once: the first two gave way.
	for i, ws := range idle[:2] {
		if _, _, err := ws.Read(ctxTimeout(t, 5*time.Second)); err == nil || strings.Contains(err.Error(), "deadline") {
			t.Errorf("connection %d, among the oldest, was not closed: %v", i+1, err)
		}
	}
	login(t, dial(t, tr.r.URL()), tr.orch)
	login(t, dial(t, tr.r.URL()), tr.workers[0])
	if n := unauthenticated(tr.r); n > 6 {
		t.Errorf("%d unauthenticated connections open; the limit is 6", n)
	}
	// Authenticated connections fill the rest: none is left to give way.
	for range 6 {
		c := dial(t, tr.r.URL())
		sub := c.Subscribe(channelFilter)
		<-sub.Closed // auth-required, with the challenge
		if err := c.Auth(newKey(t)); err != nil {
			t.Fatal(err)
		}
	}
	_, resp, err := websocket.Dial(ctxTimeout(t, 5*time.Second), tr.r.URL(), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a relay full of authenticated connections let one more in: %v", err)
	}
	if got := strings.Count(audit.String(), "made room for a new one"); got < 4 {
		t.Errorf("the audit log records %d evictions, want at least 4:\n%s", got, audit.String())
	}
}

func unauthenticated(r *Relay) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.unauth)
}
