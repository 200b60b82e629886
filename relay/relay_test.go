package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/troupebench/troupe/internal/secret"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// key is a test identity.
type key struct{ sk, pk string }

func newKey(t testing.TB) key {
	t.Helper()
	sk := nostr.GeneratePrivateKey()
	pk, err := nostr.GetPublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return key{sk, pk}
}

// trial is an open relay with one channel: an orchestrator, workers and a
// user, transcript and audit log in files.
type trial struct {
	r          *Relay
	ch         *Channel
	user, orch key
	workers    []key
	outsider   key
	transcript string
	audit      string
}

func startRelay(t testing.TB, configure func(*Relay)) *Relay {
	t.Helper()
	r := New()
	if configure != nil {
		configure(r)
	}
	if err := r.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("close relay: %v", err)
		}
	})
	return r
}

func newTrial(t testing.TB, workers int, configure func(*Relay)) *trial {
	t.Helper()
	tr := &trial{user: newKey(t), orch: newKey(t), outsider: newKey(t)}
	members := []Member{{Pubkey: tr.orch.pk, ID: "lead-1", Role: "lead", Kind: "orchestrator"}}
	for i := range workers {
		k := newKey(t)
		tr.workers = append(tr.workers, k)
		members = append(members, Member{Pubkey: k.pk, ID: fmt.Sprintf("worker-%d", i+1), Role: "implementer", Kind: "worker"})
	}
	dir := t.TempDir()
	tr.transcript = filepath.Join(dir, "transcript.jsonl")
	tr.audit = filepath.Join(dir, "audit.jsonl")
	transcript, err := os.Create(tr.transcript)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := os.Create(tr.audit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { transcript.Close(); audit.Close() })
	tr.r = startRelay(t, configure) // closed first: cleanups run last-in first-out
	tr.ch, err = tr.r.OpenChannel(ChannelConfig{
		ID: "trial-1", Name: "hello", Members: members,
		UserPubkey: tr.user.pk, UserSecretKey: secret.New(tr.user.sk), Orchestrator: tr.orch.pk,
		Transcript: transcript, Audit: audit, Secrets: tr.secrets(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// secrets are what a trial mints: every agent's secret key and the user's.
func (tr *trial) secrets() *secret.Scrubber {
	all := []secret.Secret{secret.New(tr.user.sk), secret.New(tr.orch.sk)}
	for _, w := range tr.workers {
		all = append(all, secret.New(w.sk))
	}
	return secret.NewScrubber(all...)
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

var channelFilter = nostr.Filters{{Kinds: []int{KindChannelMessage}, Tags: nostr.TagMap{"h": {"trial-1"}}}}

// login authenticates lazily, as agents do: the first REQ is refused with
// auth-required and carries the challenge, then AUTH, then the REQ again.
func login(t testing.TB, c client, k key) *clientSub {
	t.Helper()
	sub := c.Subscribe(channelFilter)
	select {
	case reason := <-sub.Closed:
		if !strings.HasPrefix(reason, PrefixAuthRequired) {
			t.Fatalf("first REQ closed with %q, want auth-required", reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no auth-required before AUTH")
	}
	if err := c.Auth(k); err != nil {
		t.Fatalf("AUTH: %v", err)
	}
	sub = c.Subscribe(channelFilter)
	select {
	case <-sub.EOSE:
	case reason := <-sub.Closed:
		t.Fatalf("REQ after AUTH closed: %s", reason)
	case <-time.After(5 * time.Second):
		t.Fatal("no EOSE")
	}
	return sub
}

func message(t testing.TB, k key, content string, tags ...nostr.Tag) nostr.Event {
	t.Helper()
	ev := nostr.Event{Kind: KindChannelMessage, CreatedAt: nostr.Now(), Content: content, Tags: append(nostr.Tags{{"h", "trial-1"}}, tags...)}
	if err := ev.Sign(k.sk); err != nil {
		t.Fatal(err)
	}
	return ev
}

func next(t testing.TB, sub *clientSub) *nostr.Event {
	t.Helper()
	select {
	case ev := <-sub.Events:
		return ev
	case reason := <-sub.Closed:
		t.Fatalf("subscription closed: %s", reason)
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return nil
}

// query subscribes and collects the stored events up to EOSE.
func query(t testing.TB, c client, f nostr.Filter) []*nostr.Event {
	t.Helper()
	sub := c.Subscribe(nostr.Filters{f})
	var out []*nostr.Event
	for {
		select {
		case ev := <-sub.Events:
			out = append(out, ev)
		case <-sub.EOSE:
			// The stored events precede EOSE, but select may see EOSE
			// first: take what is already buffered.
			for {
				select {
				case ev := <-sub.Events:
					out = append(out, ev)
				default:
					return out
				}
			}
		case reason := <-sub.Closed:
			t.Fatalf("query closed: %s", reason)
		case <-time.After(5 * time.Second):
			t.Fatal("no EOSE")
		}
	}
}

func TestMembersPublishAndRead(t *testing.T) {
	tr := newTrial(t, 1, nil)
	lead, worker := dial(t, tr.r.URL()), dial(t, tr.r.URL())
	leadSub, workerSub := login(t, lead, tr.orch), login(t, worker, tr.workers[0])

	ev := message(t, tr.orch, "@worker-1 write hello.txt", nostr.Tag{"p", tr.workers[0].pk})
	if err := lead.Publish(ev); err != "" {
		t.Fatalf("member's message refused: %s", err)
	}
	for _, sub := range []*clientSub{leadSub, workerSub} {
		if got := next(t, sub); got.ID != ev.ID || got.Content != ev.Content {
			t.Errorf("got %v, want the lead's message", got)
		}
	}
	// The same event again is a duplicate, accepted without a second copy.
	if err := lead.Publish(ev); err != "" {
		t.Errorf("duplicate refused: %s", err)
	}
	if got := tr.ch.Stats().Events; got != 1 {
		t.Errorf("channel holds %d events, want 1", got)
	}
	// A subscription opened later replays the stored messages, then EOSE.
	late := worker.Subscribe(channelFilter)
	if got := next(t, late); got.ID != ev.ID {
		t.Errorf("replay gave %v", got)
	}
}

func TestNonMemberCanNeitherReadNorWrite(t *testing.T) {
	tr := newTrial(t, 1, nil)
	out := dial(t, tr.r.URL())
	ctx := ctxTimeout(t, 5*time.Second)
	sub := out.Subscribe(channelFilter)
	<-sub.Closed // auth-required
	if err := out.Auth(tr.outsider); err != nil {
		t.Fatalf("AUTH is open to any key (access is checked per channel): %v", err)
	}
	sub = out.Subscribe(channelFilter)
	events := sub.Events
	for refused := false; !refused; {
		select {
		case reason := <-sub.Closed:
			if !strings.HasPrefix(reason, PrefixRestricted) || !strings.Contains(reason, "not a member of channel trial-1") {
				t.Errorf("REQ refused with %q", reason)
			}
			refused = true
		case ev, ok := <-events:
			if ok {
				t.Fatalf("a non-member read %v", ev)
			}
			events = nil // go-nostr's client closes it with the subscription
		case <-ctx.Done():
			t.Fatal("REQ neither refused nor served")
		}
	}
	if err := out.Publish(message(t, tr.outsider, "let me in")); !strings.HasPrefix(err, PrefixRestricted) {
		t.Errorf("non-member's message: %q", err)
	}
	// Subscribing with limit 0 or without #h gets no further.
	for _, f := range []nostr.Filter{
		{Kinds: []int{9}, Tags: nostr.TagMap{"h": {"trial-1"}}, LimitZero: true},
		{Kinds: []int{9}},
		{},
	} {
		s := out.Subscribe(nostr.Filters{f})
		if reason := <-s.Closed; !strings.HasPrefix(reason, PrefixRestricted) {
			t.Errorf("filter %v: %q", f, reason)
		}
	}
	if tr.ch.Stats().Events != 0 {
		t.Error("a refused message was stored")
	}
}

func TestRefusals(t *testing.T) {
	tr := newTrial(t, 1, func(r *Relay) { r.MaxContentBytes = 100 })
	rl := dial(t, tr.r.URL())

	// Before AUTH, an EVENT gets auth-required.
	if err := rl.Publish(message(t, tr.orch, "early")); !strings.HasPrefix(err, PrefixAuthRequired) {
		t.Errorf("EVENT before AUTH: %q", err)
	}
	login(t, rl, tr.orch)

	wrongID := message(t, tr.orch, "x")
	wrongID.ID = strings.Repeat("0", 64)
	forged := message(t, tr.orch, "y")
	forged.Content = "tampered after signing"
	forged.ID = forged.GetID()
	otherAuthor := message(t, tr.workers[0], "speaking for someone else")
	noH := nostr.Event{Kind: 9, CreatedAt: nostr.Now(), Content: "no channel"}
	noH.Sign(tr.orch.sk)
	twoH := message(t, tr.orch, "two", nostr.Tag{"h", "trial-2"})
	foreign := nostr.Event{Kind: 9, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", "other"}}}
	foreign.Sign(tr.orch.sk)
	kind1 := nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", "trial-1"}}}
	kind1.Sign(tr.orch.sk)
	stale := message(t, tr.orch, "old")
	stale.CreatedAt = nostr.Timestamp(time.Now().Add(-time.Hour).Unix())
	stale.Sign(tr.orch.sk)
	big := message(t, tr.orch, strings.Repeat("x", 101))

	tests := []struct {
		name   string
		ev     nostr.Event
		prefix string
		says   string
	}{
		{"wrong id", wrongID, PrefixInvalid, "id does not match"},
		{"forged signature", forged, PrefixInvalid, "signature does not verify"},
		{"author is not the authenticated key", otherAuthor, PrefixRestricted, "this connection authenticated as " + tr.orch.pk},
		{"no h tag", noH, PrefixInvalid, "exactly one h tag"},
		{"two h tags", twoH, PrefixInvalid, "exactly one h tag"},
		{"channel not open", foreign, PrefixRestricted, "channel other is not open"},
		{"other kind", kind1, PrefixRestricted, "kind 1 is not carried"},
		{"clock skew", stale, PrefixInvalid, "from the relay's clock"},
		{"content too large", big, PrefixInvalid, "the limit is 100"},
	}
	for _, tt := range tests {
		err := rl.Publish(tt.ev)
		if !strings.HasPrefix(err, tt.prefix) || !strings.Contains(err, tt.says) {
			t.Errorf("%s: refused with %q, want %q … %q", tt.name, err, tt.prefix, tt.says)
		}
	}
	if n := tr.ch.Stats().Events; n != 0 {
		t.Errorf("%d refused events were stored", n)
	}
	// Every refusal is in the audit logs with its reason and pubkey.
	if err := tr.r.CloseChannel("trial-1"); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, tr.audit)
	found := 0
	for _, l := range lines {
		var e auditEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		if e.Pubkey == "" || e.Reason == "" || e.Channel != "trial-1" {
			t.Errorf("audit entry lacks pubkey, reason or channel: %s", l)
		}
		found++
	}
	if found < len(tests) || tr.ch.Stats().Refusals != found {
		t.Errorf("audit log has %d entries, stats count %d, want at least %d", found, tr.ch.Stats().Refusals, len(tests))
	}
}

func TestRateLimit(t *testing.T) {
	tr := newTrial(t, 0, func(r *Relay) { r.EventRate, r.EventBurst = 1, 3 })
	rl := dial(t, tr.r.URL())
	login(t, rl, tr.orch) // the REQ and the REQ after AUTH spend two tokens
	limited := 0
	for i := range 5 {
		if err := rl.Publish(message(t, tr.orch, fmt.Sprint(i))); strings.HasPrefix(err, PrefixRateLimited) {
			limited++
		}
	}
	if limited < 3 {
		t.Errorf("%d of 5 messages rate-limited, want at least 3", limited)
	}
}

// proxy forwards TCP connections from its own port to the address it is
// given (after it listens), standing in for the tunnel that makes the relay
// ws://127.0.0.1:3600 inside a container.
func proxy(t *testing.T, target <-chan string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		dest := <-target
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", dest)
			if err != nil {
				in.Close()
				continue
			}
			wg.Go(func() { io.Copy(out, in); out.Close() })
			wg.Go(func() { io.Copy(in, out); in.Close() })
		}
	})
	return "ws://" + ln.Addr().String()
}

func TestAuthUnderContainerURL(t *testing.T) {
	target := make(chan string, 2)
	tunnel := proxy(t, target)
	tr := newTrial(t, 1, func(r *Relay) { r.AuthURLs = []string{tunnel} })
	hostPort := strings.TrimPrefix(tr.r.URL(), "ws://")
	target <- hostPort
	// go-nostr signs AUTH for the URL it dialed: the tunnel's.
	login(t, dial(t, tunnel), tr.orch)

	// A URL the relay was not told about is refused.
	other := make(chan string, 1)
	other <- hostPort
	rl := dial(t, proxy(t, other))
	sub := rl.Subscribe(channelFilter)
	<-sub.Closed
	err := rl.Auth(tr.workers[0])
	if err == nil || !strings.Contains(err.Error(), "invalid: the relay tag") {
		t.Fatalf("AUTH under an unknown URL: %v", err)
	}
}

func TestIdentityConflictAndReconnect(t *testing.T) {
	tr := newTrial(t, 1, nil)
	first := dial(t, tr.r.URL())
	login(t, first, tr.workers[0])

	second := dial(t, tr.r.URL())
	sub := second.Subscribe(channelFilter)
	<-sub.Closed
	err := second.Auth(tr.workers[0])
	if err == nil || !strings.Contains(err.Error(), "restricted: identity conflict") {
		t.Fatalf("second AUTH with a connected key: %v", err)
	}
	if got := tr.ch.Stats().IdentityConflicts; got != 1 {
		t.Errorf("identity conflicts %d, want 1", got)
	}

	// When the first connection ends, the key may connect and AUTH again.
	first.Close()
	waitMissing(t, tr.ch, "worker-1")
	again := dial(t, tr.r.URL())
	resub := login(t, again, tr.workers[0])
	if _, err := tr.ch.Post(t.Context(), "still there?", tr.workers[0].pk); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, resub); ev.Content != "still there?" {
		t.Errorf("after re-AUTH got %q", ev.Content)
	}
}

func TestReadyAndDone(t *testing.T) {
	tr := newTrial(t, 2, nil)
	ready, missing, _ := tr.ch.Readiness()
	if len(ready) != 0 || strings.Join(missing, ",") != "lead-1,worker-1,worker-2" {
		t.Fatalf("before anyone connects: ready %v missing %v", ready, missing)
	}
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := tr.ch.WaitReady(short)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "lead-1, worker-1, worker-2") {
		t.Fatalf("WaitReady with nobody: %v", err)
	}

	// Agents come up while WaitReady waits; it returns when the last one
	// subscribes. A worker that subscribes to its mentions only counts too.
	waited := make(chan error, 1)
	go func() { waited <- tr.ch.WaitReady(ctxTimeout(t, 10*time.Second)) }()
	lead := dial(t, tr.r.URL())
	leadSub := login(t, lead, tr.orch)
	w1 := dial(t, tr.r.URL())
	w1Sub := login(t, w1, tr.workers[0])
	w2 := dial(t, tr.r.URL())
	login(t, w2, tr.workers[1])
	mentions := w2.Subscribe(nostr.Filters{{Kinds: []int{9}, Tags: nostr.TagMap{"h": {"trial-1"}, "p": {tr.workers[1].pk}}}})
	<-mentions.EOSE
	if err := <-waited; err != nil {
		t.Fatalf("WaitReady: %v", err)
	}

	// The task, posted in process by the user, mentions the lead explicitly.
	task, err := tr.ch.Post(t.Context(), "Create /app/hello.txt", tr.orch.pk)
	if err != nil {
		t.Fatal(err)
	}
	if got := next(t, leadSub); got.ID != task.ID || got.PubKey != tr.user.pk || !got.Tags.ContainsAny("p", []string{tr.orch.pk}) {
		t.Errorf("lead got %v", got)
	}
	next(t, w1Sub)

	// A worker's DONE: is kept and counted, and ends nothing.
	if err := w1.Publish(message(t, tr.workers[0], "DONE: I think we are finished")); err != "" {
		t.Fatal(err)
	}
	next(t, leadSub)
	select {
	case <-tr.ch.Done():
		t.Fatal("a worker's DONE: ended the trial")
	default:
	}
	if tr.ch.Stats().IgnoredDone != 1 {
		t.Errorf("ignored DONE count %d", tr.ch.Stats().IgnoredDone)
	}
	// "DONE" without the colon, or not at the start, is no completion.
	lead.Publish(message(t, tr.orch, "Not DONE: yet"))
	lead.Publish(message(t, tr.orch, "DONE without colon"))
	done := message(t, tr.orch, "DONE: hello.txt written and checked")
	if err := lead.Publish(done); err != "" {
		t.Fatal(err)
	}
	select {
	case <-tr.ch.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the orchestrator's DONE: did not end the wait")
	}
	if got := tr.ch.DoneEvent(); got == nil || got.ID != done.ID {
		t.Errorf("DoneEvent %v", got)
	}
	// A lead that disconnects is no longer ready.
	lead.Close()
	waitMissing(t, tr.ch, "lead-1")
}

// waitMissing waits, on readiness changes, until the agent is not ready.
func waitMissing(t testing.TB, ch *Channel, id string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		_, missing, changed := ch.Readiness()
		if slices.Contains(missing, id) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%s still counted ready after disconnecting (missing %v)", id, missing)
		}
	}
}

func TestCloseChannelLeavesCompleteTranscript(t *testing.T) {
	tr := newTrial(t, 1, nil)
	lead, worker := dial(t, tr.r.URL()), dial(t, tr.r.URL())
	leadSub := login(t, lead, tr.orch)
	login(t, worker, tr.workers[0])
	var want []string
	post, err := tr.ch.Post(t.Context(), "task", tr.orch.pk)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, post.ID)
	profile := nostr.Event{Kind: KindProfile, CreatedAt: nostr.Now(), Content: `{"name":"worker-1"}`}
	profile.Sign(tr.workers[0].sk)
	if err := worker.Publish(profile); err != "" {
		t.Fatalf("member's profile refused: %s", err)
	}
	want = append(want, profile.ID)
	for i := range 20 {
		k, rl := tr.orch, lead
		if i%2 == 1 {
			k, rl = tr.workers[0], worker
		}
		ev := message(t, k, fmt.Sprintf("message %d", i))
		if err := rl.Publish(ev); err != "" {
			t.Fatal(err)
		}
		want = append(want, ev.ID)
	}
	if err := tr.r.CloseChannel("trial-1"); err != nil {
		t.Fatal(err)
	}
	// The lead's subscription is told the channel closed.
	for {
		select {
		case reason := <-leadSub.Closed:
			if !strings.Contains(reason, "channel trial-1 was closed") {
				t.Errorf("CLOSED reason %q", reason)
			}
		case <-leadSub.Events:
			continue
		case <-time.After(5 * time.Second):
			t.Fatal("no CLOSED after CloseChannel")
		}
		break
	}
	lines := readLines(t, tr.transcript)
	if len(lines) != len(want) {
		t.Fatalf("transcript has %d lines, want %d", len(lines), len(want))
	}
	for i, l := range lines {
		var line struct {
			Seq        int64       `json:"seq"`
			ReceivedAt time.Time   `json:"received_at"`
			Event      nostr.Event `json:"event"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatal(err)
		}
		if line.Seq != int64(i+1) || line.Event.ID != want[i] || line.ReceivedAt.IsZero() {
			t.Errorf("line %d: seq %d id %s, want seq %d id %s", i, line.Seq, line.Event.ID, i+1, want[i])
		}
		if ok, _ := line.Event.CheckSignature(); !ok || !line.Event.CheckID() {
			t.Errorf("line %d does not verify: the transcript must hold the signed events", i)
		}
	}
	// A closed channel takes nothing more.
	if err := lead.Publish(message(t, tr.orch, "late")); !strings.Contains(err, "not open") {
		t.Errorf("message after close: %q", err)
	}
	if _, err := tr.ch.Post(t.Context(), "late"); err == nil {
		t.Error("Post after close succeeded")
	}
}

func TestHundredConcurrentClients(t *testing.T) {
	tr := newTrial(t, 99, func(r *Relay) { r.EventRate = 0 })
	keys := append([]key{tr.orch}, tr.workers...)
	clients := make([]client, len(keys))
	subs := make([]*clientSub, len(keys))
	for i, k := range keys {
		clients[i] = dial(t, tr.r.URL())
		subs[i] = login(t, clients[i], k)
	}
	if err := tr.ch.WaitReady(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// All hundred publish at once; every one of them sees every message.
	// Each subscription is read while the others publish, as a client
	// does: go-nostr's reader waits for a subscription's reader, so an
	// unread one would hold back its client's OKs.
	seen := make([]map[string]bool, len(keys))
	var readers sync.WaitGroup
	for i, sub := range subs {
		seen[i] = map[string]bool{}
		readers.Go(func() {
			for range keys {
				select {
				case ev := <-sub.Events:
					seen[i][ev.ID] = true
				case reason := <-sub.Closed:
					t.Errorf("client %d: subscription closed: %s", i, reason)
					return
				case <-time.After(20 * time.Second):
					t.Errorf("client %d: no event for 20s", i)
					return
				}
			}
		})
	}
	reasons := make([]string, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		ev := message(t, k, fmt.Sprintf("from %d", i))
		wg.Go(func() { reasons[i] = clients[i].Publish(ev) })
	}
	wg.Wait()
	for i, r := range reasons {
		if r != "" {
			t.Errorf("client %d refused: %s", i, r)
		}
	}
	readers.Wait()
	for i := range subs {
		if len(seen[i]) != len(keys) {
			t.Errorf("client %d saw %d distinct messages, want %d", i, len(seen[i]), len(keys))
		}
	}
	if got := tr.ch.Stats().Events; got != len(keys) {
		t.Errorf("channel holds %d events", got)
	}
}

func TestMetadataProfilesAndInfo(t *testing.T) {
	tr := newTrial(t, 1, nil)
	rl := dial(t, tr.r.URL())
	login(t, rl, tr.workers[0])
	ctx := ctxTimeout(t, 5*time.Second)
	evs := query(t, rl, nostr.Filter{Kinds: []int{KindChannelMetadata, KindChannelMembers}, Tags: nostr.TagMap{"d": {"trial-1"}}})
	if len(evs) != 2 {
		t.Fatalf("got %d metadata events", len(evs))
	}
	for _, ev := range evs {
		if ok, _ := ev.CheckSignature(); !ok || ev.PubKey != tr.r.PublicKey() {
			t.Errorf("metadata not signed by the relay: %v", ev)
		}
		if ev.Kind == KindChannelMembers {
			var lead nostr.Tag
			for _, tag := range ev.Tags {
				if len(tag) >= 6 && tag[0] == "p" && tag[1] == tr.orch.pk {
					lead = tag
				}
			}
			if lead == nil || lead[3] != "lead-1" || lead[4] != "lead" || lead[5] != "orchestrator" || !ev.Tags.ContainsAny("p", []string{tr.user.pk}) {
				t.Errorf("member list lacks the lead as [p, pubkey, member, id, role, kind] or the user: %v", ev.Tags)
			}
		}
	}
	// NIP-11 over plain HTTP.
	req, _ := http.NewRequestWithContext(ctx, "GET", strings.Replace(tr.r.URL(), "ws://", "http://", 1), nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		SupportedNIPs []int `json:"supported_nips"`
		PubKey        string
		Limitation    struct {
			AuthRequired bool `json:"auth_required"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if !info.Limitation.AuthRequired || info.PubKey != tr.r.PublicKey() || len(info.SupportedNIPs) != 3 {
		t.Errorf("NIP-11 document %+v", info)
	}
}

func TestInProcessSubscription(t *testing.T) {
	tr := newTrial(t, 1, nil)
	first, _ := tr.ch.Post(t.Context(), "one")
	sub, err := tr.ch.Subscribe(true, 8)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := tr.ch.Post(t.Context(), "two")
	for _, want := range []string{first.ID, second.ID} {
		if got := <-sub.Events(); got.ID != want {
			t.Errorf("got %s want %s", got.ID, want)
		}
	}
	// A reader that falls behind is cut off, loudly.
	small, _ := tr.ch.Subscribe(false, 1)
	tr.ch.Post(t.Context(), "three")
	tr.ch.Post(t.Context(), "four")
	<-small.Events()
	if _, open := <-small.Events(); open || !errors.Is(small.Err(), ErrSlowSubscriber) {
		t.Errorf("slow subscriber: open %v err %v", open, small.Err())
	}
	sub.Close()
	if sub.Err() != nil {
		t.Errorf("Close left error %v", sub.Err())
	}
}

func TestOpenChannelValidates(t *testing.T) {
	r := startRelay(t, nil)
	user, a := newKey(t), newKey(t)
	tests := []struct {
		cfg  ChannelConfig
		want string
	}{
		{ChannelConfig{ID: "", Members: []Member{{Pubkey: a.pk}}, UserPubkey: user.pk, UserSecretKey: secret.New(user.sk), Orchestrator: a.pk}, "channel id"},
		{ChannelConfig{ID: "c", Members: []Member{{Pubkey: a.pk}}, UserPubkey: user.pk, UserSecretKey: secret.New(a.sk), Orchestrator: a.pk}, "does not match"},
		{ChannelConfig{ID: "c", Members: []Member{{Pubkey: "npub1xyz"}}, UserPubkey: user.pk, UserSecretKey: secret.New(user.sk), Orchestrator: a.pk}, "not 64 lower-case hex"},
		{ChannelConfig{ID: "c", Members: []Member{{Pubkey: a.pk}}, UserPubkey: user.pk, UserSecretKey: secret.New(user.sk), Orchestrator: user.pk}, "orchestrator"},
		{ChannelConfig{ID: "c", Members: []Member{{Pubkey: a.pk}, {Pubkey: a.pk}}, UserPubkey: user.pk, UserSecretKey: secret.New(user.sk), Orchestrator: a.pk}, "appears twice"},
	}
	for _, tt := range tests {
		if _, err := r.OpenChannel(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.cfg, err, tt.want)
		}
	}
	ok := ChannelConfig{ID: "c", Members: []Member{{Pubkey: a.pk}}, UserPubkey: user.pk, UserSecretKey: secret.New(user.sk), Orchestrator: a.pk}
	if _, err := r.OpenChannel(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := r.OpenChannel(ok); err == nil || !strings.Contains(err.Error(), "already open") {
		t.Errorf("second open: %v", err)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	r := New()
	if err := r.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	user, a := newKey(t), newKey(t)
	if _, err := r.OpenChannel(ChannelConfig{ID: "trial-1", Members: []Member{{Pubkey: a.pk, ID: "a-1"}}, UserPubkey: user.pk, UserSecretKey: secret.New(user.sk), Orchestrator: a.pk}); err != nil {
		t.Fatal(err)
	}
	rl := dialRaw(t, r.URL()) // its Close waits for its reader, so the count below is exact
	login(t, rl, a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	rl.Close()
	waitGoroutines(t, before)
}

// waitGoroutines fails unless the goroutine count comes back to at most
// want: a goleak-style check. Client-side goroutines of go-nostr end a
// moment after their connection does, so it waits a little for them.
func waitGoroutines(t testing.TB, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, want at most %d:\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// A transcript on a pipe or terminal (troupe relay --transcript -) cannot be
// synced; closing the channel must not call that an error.
func TestCloseChannelWithPipeTranscript(t *testing.T) {
	r := startRelay(t, nil)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	go io.Copy(io.Discard, pr)
	user, a := newKey(t), newKey(t)
	ch, err := r.OpenChannel(ChannelConfig{ID: "p", Members: []Member{{Pubkey: a.pk}}, UserPubkey: user.pk, UserSecretKey: secret.New(user.sk), Orchestrator: a.pk, Transcript: pw})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Post(t.Context(), "hi"); err != nil {
		t.Fatal(err)
	}
	if err := r.CloseChannel("p"); err != nil {
		t.Errorf("closing a channel whose transcript is a pipe: %v", err)
	}
}

// TestSecretsAreRefused: a message carrying a secret minted for the trial,
// in its content, its tags or a profile, is refused with a reason that does
// not quote it, and neither the transcript nor the audit log holds it.
func TestSecretsAreRefused(t *testing.T) {
	tr := newTrial(t, 1, nil)
	lead := dial(t, tr.r.URL())
	login(t, lead, tr.orch)
	profile := nostr.Event{Kind: KindProfile, CreatedAt: nostr.Now(), Content: `{"name":"lead","about":"my key is ` + tr.orch.sk + `"}`}
	if err := profile.Sign(tr.orch.sk); err != nil {
		t.Fatal(err)
	}
	for name, ev := range map[string]nostr.Event{
		"own key in the content":   message(t, tr.orch, "my key: "+tr.orch.sk),
		"a worker's key, in a tag": message(t, tr.orch, "see the tag", nostr.Tag{"x", "prefix" + tr.workers[0].sk}),
		"the user's key":           message(t, tr.orch, tr.user.sk),
		"own key in a profile":     profile,
	} {
		reason := lead.Publish(ev)
		if !strings.HasPrefix(reason, PrefixRestricted) || !strings.Contains(reason, "secret") {
			t.Errorf("%s: published, or refused for another reason: %q", name, reason)
		}
		if strings.Contains(reason, tr.orch.sk) || strings.Contains(reason, tr.workers[0].sk) {
			t.Errorf("%s: the refusal quotes the secret", name)
		}
	}
	if reason := lead.Publish(message(t, tr.orch, "nothing secret: "+tr.orch.pk)); reason != "" {
		t.Errorf("a plain message with a pubkey was refused: %s", reason)
	}
	if st := tr.ch.Stats(); st.Refusals != 4 || st.Events != 1 {
		t.Errorf("stats %+v, want 4 refusals and 1 event", st)
	}
	for _, file := range []string{tr.transcript, tr.audit} {
		data, _ := os.ReadFile(file)
		for _, k := range []key{tr.orch, tr.workers[0], tr.user} {
			if strings.Contains(string(data), k.sk) {
				t.Errorf("%s holds a secret key", filepath.Base(file))
			}
		}
	}
	if audit, _ := os.ReadFile(tr.audit); strings.Count(string(audit), "carries a secret") != 4 {
		t.Errorf("the audit log does not record the 4 refusals:\n%s", audit)
	}
}

// TestNextRound: a multi-step trial's channel takes a DONE: per round, and
// an agent that joins a later round is sent none of the earlier rounds'
// messages; the same key may connect again as soon as its agent is seen
// leaving.
func TestNextRound(t *testing.T) {
	tr := newTrial(t, 0, nil)
	lead := dial(t, tr.r.URL())
	login(t, lead, tr.orch)
	if _, err := tr.ch.Post(t.Context(), "step one", tr.orch.pk); err != nil {
		t.Fatal(err)
	}
	first := message(t, tr.orch, "DONE: step one")
	if err := lead.Publish(first); err != "" {
		t.Fatal(err)
	}
	<-tr.ch.Done()
	lead.Close()
	waitMissing(t, tr.ch, "lead-1")

	tr.ch.NextRound()
	select {
	case <-tr.ch.Done():
		t.Fatal("the new round is done before its DONE:")
	default:
	}
	if tr.ch.DoneEvent() != nil || len(tr.ch.Events()) != 0 {
		t.Fatalf("after NextRound: done %v, stored %d", tr.ch.DoneEvent(), len(tr.ch.Events()))
	}
	again := dial(t, tr.r.URL()) // at once: no identity conflict
	sub := login(t, again, tr.orch)
	task, err := tr.ch.Post(t.Context(), "step two", tr.orch.pk)
	if err != nil {
		t.Fatal(err)
	}
	if got := next(t, sub); got.ID != task.ID {
		t.Errorf("the new round's first message is %q, want the step's task", got.Content)
	}
	second := message(t, tr.orch, "DONE: step two")
	if err := again.Publish(second); err != "" {
		t.Fatal(err)
	}
	select {
	case <-tr.ch.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the second round's DONE: was not seen")
	}
	if got := tr.ch.DoneEvent(); got == nil || got.ID != second.ID || tr.ch.Stats().IgnoredDone != 0 || tr.ch.Stats().IdentityConflicts != 0 {
		t.Errorf("done %v, stats %+v", got, tr.ch.Stats())
	}
}
