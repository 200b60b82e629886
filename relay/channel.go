package relay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/nbd-wtf/go-nostr"

	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/trialdir"
)

// Member is one agent of a channel.
type Member struct {
	Pubkey string
	// ID, Role and Kind are the agent's name, team role and kind (lead-1,
	// lead, orchestrator); they are published in the channel's member list
	// so agents can resolve teammates by id or role and find the
	// orchestrator.
	ID, Role, Kind string
}

// ChannelConfig describes a trial channel.
type ChannelConfig struct {
	// ID is the channel id, the value of every message's h tag.
	ID          string
	Name, About string
	// Members are the agents; they and the user are the only members.
	Members []Member
	// User is the trial user's key pair: the orchestrator posts the task in
	// process as this user. The secret key never leaves the host.
	UserPubkey    string
	UserSecretKey secret.Secret
	// Orchestrator is the agent whose "DONE:" ends the trial.
	Orchestrator string
	// OnDone runs when the orchestrator's DONE: is accepted, before the
	// relay answers OK to it, under the channel's lock: what it does (the
	// trial freezes its model calls) comes before anything the
	// orchestrator does once it has the OK. It must not call the channel.
	OnDone func()
	// Transcript receives every accepted event as a JSON line, in relay
	// order; it is synced on close when it can be. nil keeps none.
	Transcript io.Writer
	// Audit receives every refusal that concerns the channel as a JSON line.
	Audit io.Writer
	// Secrets finds what was minted for the trial (keys, tokens): an event
	// that carries one in its content or tags is refused, since a signed
	// event cannot be scrubbed without breaking its signature. nil finds
	// nothing.
	Secrets *secret.Scrubber
}

// Stats counts what happened in a channel.
type Stats struct {
	Events int
	// IgnoredDone counts "DONE:" messages from anyone but the orchestrator,
	// and the orchestrator's after its first.
	IgnoredDone       int
	Refusals          int
	IdentityConflicts int
}

// Channel is an open trial channel; the orchestrator holds it.
type Channel struct {
	r       *Relay
	cfg     ChannelConfig
	members map[string]Member // agents and the user, by pubkey
	meta    []*nostr.Event    // relay-signed 39000 and 39002, fixed at open

	mu      sync.Mutex
	closed  bool
	seq     int64
	stored  []*stored // the newest MaxStoredEvents, oldest first
	seen    map[string]bool
	subs    map[*subscription]struct{}
	inproc  map[*Subscription]struct{}
	live    map[string]int // agent pubkey -> live subscriptions matching the channel
	changed chan struct{}  // closed and replaced when readiness changes
	done    *nostr.Event
	doneCh  chan struct{}
	stats   Stats
	// writeErr is the first transcript write error; the channel refuses
	// events after it, since they could not be recorded.
	writeErr error
}

type stored struct {
	ev   *nostr.Event
	json []byte
}

// subscription is one client REQ, with its filters for each channel.
type subscription struct {
	id      string
	quoted  string // id as a JSON string, for the writer
	conn    *conn
	filters map[*Channel][]nostr.Filter
}

// OpenChannel opens a trial channel: from now on its members may
// authenticate, subscribe and post in it.
func (r *Relay) OpenChannel(cfg ChannelConfig) (*Channel, error) {
	if err := validateChannel(cfg); err != nil {
		return nil, err
	}
	ch := &Channel{
		r:       r,
		cfg:     cfg,
		members: map[string]Member{cfg.UserPubkey: {Pubkey: cfg.UserPubkey, ID: "user", Role: "user"}},
		seen:    map[string]bool{},
		subs:    map[*subscription]struct{}{},
		inproc:  map[*Subscription]struct{}{},
		live:    map[string]int{},
		changed: make(chan struct{}),
		doneCh:  make(chan struct{}),
	}
	for _, m := range cfg.Members {
		ch.members[m.Pubkey] = m
	}
	meta, err := ch.metadata()
	if err != nil {
		return nil, err
	}
	ch.meta = meta

	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.open || r.closed:
		return nil, ErrClosed
	case r.channels[cfg.ID] != nil:
		return nil, fmt.Errorf("relay: channel %s is already open", cfg.ID)
	}
	r.channels[cfg.ID] = ch
	return ch, nil
}

func validateChannel(cfg ChannelConfig) error {
	var errs []error
	if cfg.ID == "" || len(cfg.ID) > 128 || strings.ContainsAny(cfg.ID, " \t\r\n\"\\") {
		errs = append(errs, fmt.Errorf("channel id %q must be 1 to 128 characters without spaces or quotes", cfg.ID))
	}
	if !isHexKey(cfg.UserPubkey) {
		errs = append(errs, fmt.Errorf("user pubkey %q is not 64 lower-case hex digits", cfg.UserPubkey))
	} else if pk, err := nostr.GetPublicKey(cfg.UserSecretKey.Reveal()); err != nil || pk != cfg.UserPubkey {
		errs = append(errs, errors.New("the user's secret key does not match the user's pubkey"))
	}
	if len(cfg.Members) == 0 {
		errs = append(errs, errors.New("a channel needs at least one agent member"))
	}
	seen := map[string]bool{cfg.UserPubkey: true}
	orchestrator := false
	for _, m := range cfg.Members {
		switch {
		case !isHexKey(m.Pubkey):
			errs = append(errs, fmt.Errorf("member %s: pubkey %q is not 64 lower-case hex digits", m.ID, m.Pubkey))
		case seen[m.Pubkey]:
			errs = append(errs, fmt.Errorf("member %s: pubkey %s appears twice (or is the user's)", m.ID, m.Pubkey))
		}
		seen[m.Pubkey] = true
		orchestrator = orchestrator || m.Pubkey == cfg.Orchestrator
	}
	if !orchestrator {
		errs = append(errs, fmt.Errorf("orchestrator %q is not one of the members", cfg.Orchestrator))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("relay: channel %s: %w", cfg.ID, err)
	}
	return nil
}

// metadata signs the channel's 39000 (about) and 39002 (members) events.
// Member tags are ["p", pubkey, "owner"|"member", agent id, team role,
// kind]; the trial user is ["p", pubkey, "owner", "user", "user", "user"].
func (ch *Channel) metadata() ([]*nostr.Event, error) {
	now := nostr.Timestamp(ch.r.Now().Unix())
	about := &nostr.Event{Kind: KindChannelMetadata, CreatedAt: now, Tags: nostr.Tags{
		{"d", ch.cfg.ID}, {"name", cmp.Or(ch.cfg.Name, ch.cfg.ID)}, {"about", ch.cfg.About}, {"private"}, {"closed"},
	}}
	members := &nostr.Event{Kind: KindChannelMembers, CreatedAt: now, Tags: nostr.Tags{
		{"d", ch.cfg.ID}, {"p", ch.cfg.UserPubkey, "owner", "user", "user", "user"},
	}}
	for _, m := range ch.cfg.Members {
		members.Tags = append(members.Tags, nostr.Tag{"p", m.Pubkey, "member", m.ID, m.Role, m.Kind})
	}
	for _, ev := range []*nostr.Event{about, members} {
		if err := ev.Sign(ch.r.SecretKey); err != nil {
			return nil, fmt.Errorf("relay: sign channel metadata: %w", err)
		}
	}
	return []*nostr.Event{about, members}, nil
}

// ID is the channel's id.
func (ch *Channel) ID() string { return ch.cfg.ID }

func (ch *Channel) isMember(pk string) bool {
	_, ok := ch.members[pk]
	return ok
}

func (ch *Channel) memberKeys() []string {
	keys := make([]string, 0, len(ch.members))
	for pk := range ch.members {
		keys = append(keys, pk)
	}
	return keys
}

// append accepts an event into the channel: transcript, store, delivery to
// every matching subscription, completion tracking. It runs under the
// channel's lock, so transcript order, store order and every subscriber's
// delivery order are the same: relay order.
func (ch *Channel) append(ev *nostr.Event) (duplicate bool, err error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case ch.closed:
		return false, fmt.Errorf("channel %s is closed", ch.cfg.ID)
	case ch.writeErr != nil:
		return false, ch.writeErr
	case ch.seen[ev.ID]:
		return true, nil
	}
	raw := mustJSON(ev)
	ch.seq++
	if ch.cfg.Transcript != nil {
		line, _ := json.Marshal(trialdir.Line{Seq: ch.seq, ReceivedAt: ch.r.Now().UTC(), Event: raw})
		if _, err := ch.cfg.Transcript.Write(append(line, '\n')); err != nil {
			ch.seq--
			ch.writeErr = fmt.Errorf("transcript of channel %s: %w", ch.cfg.ID, err)
			return false, ch.writeErr
		}
	}
	ch.seen[ev.ID] = true
	ch.stored = append(ch.stored, &stored{ev: ev, json: raw})
	if over := len(ch.stored) - ch.r.MaxStoredEvents; over > 0 {
		ch.stored = slices.Delete(ch.stored, 0, over)
	}
	ch.stats.Events++
	if isDone(ev) {
		if ev.PubKey == ch.cfg.Orchestrator && ch.done == nil {
			ch.done = ev
			if ch.cfg.OnDone != nil {
				ch.cfg.OnDone()
			}
			close(ch.doneCh)
		} else {
			ch.stats.IgnoredDone++
		}
	}
	for sub := range ch.subs {
		for _, f := range sub.filters[ch] {
			if f.Matches(ev) {
				sub.conn.enqueue(outFrame{sub: sub.quoted, payload: raw, event: true})
				break
			}
		}
	}
	for s := range ch.inproc {
		s.deliver(ev)
	}
	return false, nil
}

// subscribe registers a client subscription and queues the stored events its
// filters match, under the lock, so nothing falls between replay and live
// delivery. It reports false when the channel has closed.
func (ch *Channel) subscribe(sub *subscription, filters []nostr.Filter) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return false
	}
	for _, f := range filters {
		if f.LimitZero {
			continue
		}
		var matched []*stored
		for _, s := range ch.stored {
			if f.Matches(s.ev) {
				matched = append(matched, s)
			}
		}
		// At most half a client's queue, the newest: a replay must not
		// overflow the queue and disconnect a client that subscribes late.
		limit := sub.conn.r.SendQueue / 2
		if f.Limit > 0 {
			limit = min(limit, f.Limit)
		}
		if len(matched) > limit {
			matched = matched[len(matched)-limit:]
		}
		for _, s := range matched {
			sub.conn.enqueue(outFrame{sub: sub.quoted, payload: s.json, event: true})
		}
	}
	ch.subs[sub] = struct{}{}
	if pk := sub.conn.pubkey; pk != ch.cfg.UserPubkey && slices.ContainsFunc(filters, func(f nostr.Filter) bool { return matchesChannel(f, ch.cfg.ID) }) {
		ch.live[pk]++
		if ch.live[pk] == 1 {
			ch.notifyLocked()
		}
	}
	return true
}

func (ch *Channel) unsubscribe(sub *subscription) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if _, ok := ch.subs[sub]; !ok {
		return
	}
	delete(ch.subs, sub)
	if pk := sub.conn.pubkey; slices.ContainsFunc(sub.filters[ch], func(f nostr.Filter) bool { return matchesChannel(f, ch.cfg.ID) }) && ch.live[pk] > 0 {
		ch.live[pk]--
		if ch.live[pk] == 0 {
			delete(ch.live, pk)
			ch.notifyLocked()
		}
	}
}

func (ch *Channel) notifyLocked() {
	close(ch.changed)
	ch.changed = make(chan struct{})
}

// Readiness says which agents are ready (authenticated, with a live
// subscription to the channel's messages) and which are not, by agent id,
// with a channel that is closed at the next change.
func (ch *Channel) Readiness() (ready, missing []string, changed <-chan struct{}) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, m := range ch.cfg.Members {
		if ch.live[m.Pubkey] > 0 {
			ready = append(ready, m.ID)
		} else {
			missing = append(missing, m.ID)
		}
	}
	return ready, missing, ch.changed
}

// ErrNotReady is wrapped by WaitReady's error when agents never became ready.
var ErrNotReady = errors.New("agents not ready")

// WaitReady blocks until every agent is ready or ctx ends. It wakes on
// readiness changes only; its error names the agents still missing.
func (ch *Channel) WaitReady(ctx context.Context) error {
	for {
		_, missing, changed := ch.Readiness()
		if len(missing) == 0 {
			return nil
		}
		ch.mu.Lock()
		closed := ch.closed
		ch.mu.Unlock()
		if closed {
			return fmt.Errorf("channel %s closed while waiting for %s: %w", ch.cfg.ID, strings.Join(missing, ", "), ErrNotReady)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s had not authenticated and subscribed to channel %s (%v)", ErrNotReady, strings.Join(missing, ", "), ch.cfg.ID, context.Cause(ctx))
		case <-changed:
		}
	}
}

// Done is closed when the orchestrator posts its first message starting
// with "DONE:"; DoneEvent then returns that message.
func (ch *Channel) Done() <-chan struct{} {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.doneCh
}

// NextRound starts another round of the channel's work, for a trial of
// several steps (a multi-step task), once the round's agents have left:
// the orchestrator's next "DONE:" counts (Done and DoneEvent are the new
// round's), and whoever subscribes from now on is sent none of the
// earlier rounds' messages, so a step's team starts, as Harbor's agent
// does, from the task's files and the step's instruction alone. The
// transcript keeps every round.
func (ch *Channel) NextRound() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.stored = nil
	if ch.done != nil {
		ch.done = nil
		ch.doneCh = make(chan struct{})
	}
}

// DoneEvent returns the orchestrator's first "DONE:" message, or nil.
func (ch *Channel) DoneEvent() *nostr.Event {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.done
}

// Stats returns the channel's counters.
func (ch *Channel) Stats() Stats {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.stats
}

// Events returns the stored events, oldest first (at most MaxStoredEvents;
// the transcript has them all).
func (ch *Channel) Events() []*nostr.Event {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	out := make([]*nostr.Event, len(ch.stored))
	for i, s := range ch.stored {
		out[i] = s.ev
	}
	return out
}

func (ch *Channel) recordRefusal(e auditEntry) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.stats.Refusals++
	if ch.cfg.Audit != nil && !ch.closed {
		line, _ := json.Marshal(e)
		ch.cfg.Audit.Write(append(line, '\n'))
	}
}

func (ch *Channel) recordIdentityConflict() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.stats.IdentityConflicts++
}

// Post publishes a message as the trial user, signed with the user's key,
// mentioning the given pubkeys with p tags (the task is never parsed for
// names). It goes through the same checks and the same order as any event.
func (ch *Channel) Post(ctx context.Context, content string, mentions ...string) (*nostr.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ev := &nostr.Event{
		Kind:      KindChannelMessage,
		CreatedAt: nostr.Timestamp(ch.r.Now().Unix()),
		Content:   content,
		Tags:      nostr.Tags{{"h", ch.cfg.ID}},
	}
	for _, pk := range mentions {
		if !ch.isMember(pk) {
			return nil, fmt.Errorf("relay: post to %s: mention %s is not a member", ch.cfg.ID, pk)
		}
		ev.Tags = append(ev.Tags, nostr.Tag{"p", pk})
	}
	if err := ev.Sign(ch.cfg.UserSecretKey.Reveal()); err != nil {
		return nil, fmt.Errorf("relay: post to %s: sign: %w", ch.cfg.ID, err)
	}
	if _, r := checkEvent(ev, ch.r.Now(), ch.r.Skew, ch.r.MaxContentBytes); r != "" {
		return nil, fmt.Errorf("relay: post to %s: %s", ch.cfg.ID, r)
	}
	if _, err := ch.append(ev); err != nil {
		return nil, fmt.Errorf("relay: post to %s: %w", ch.cfg.ID, err)
	}
	return ev, nil
}

// CloseChannel closes a channel: its subscriptions end with CLOSED, readiness
// waiters wake, and the transcript and audit log are synced when they can
// be. Closing a channel that is not open does nothing.
func (r *Relay) CloseChannel(id string) error {
	r.mu.Lock()
	ch, ok := r.channels[id]
	delete(r.channels, id)
	r.mu.Unlock()
	if !ok {
		return nil
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.closed = true
	for sub := range ch.subs {
		closedMsg, _ := json.Marshal(nostr.ClosedEnvelope{SubscriptionID: sub.id, Reason: PrefixError + " channel " + id + " was closed"})
		sub.conn.enqueue(outFrame{payload: closedMsg})
	}
	clear(ch.subs)
	clear(ch.live)
	for s := range ch.inproc {
		s.end(ErrClosed)
	}
	ch.notifyLocked()
	var errs []error
	for name, w := range map[string]io.Writer{"transcript": ch.cfg.Transcript, "audit log": ch.cfg.Audit} {
		if s, ok := w.(interface{ Sync() error }); ok {
			// A terminal or a pipe cannot be synced, and need not be.
			if err := s.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
				errs = append(errs, fmt.Errorf("relay: sync %s of channel %s: %w", name, id, err))
			}
		}
	}
	if ch.writeErr != nil {
		errs = append(errs, ch.writeErr)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// Subscription follows a channel's accepted events in process.
type Subscription struct {
	ch     *Channel
	events chan *nostr.Event
	// ended and err are guarded by the channel's lock.
	ended bool
	err   error
}

// ErrSlowSubscriber ends an in-process subscription whose reader fell
// behind by more than its buffer.
var ErrSlowSubscriber = errors.New("subscriber fell behind")

// Subscribe follows every event the channel accepts from now on, preceded
// by the stored ones when history is true. buffer bounds how far the reader
// may fall behind before the subscription ends with ErrSlowSubscriber.
func (ch *Channel) Subscribe(history bool, buffer int) (*Subscription, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return nil, ErrClosed
	}
	s := &Subscription{ch: ch, events: make(chan *nostr.Event, max(buffer, 1))}
	ch.inproc[s] = struct{}{}
	if history {
		for _, st := range ch.stored {
			s.deliver(st.ev)
		}
	}
	if s.ended {
		return nil, fmt.Errorf("relay: subscribe to %s: %d stored events do not fit a buffer of %d", ch.cfg.ID, len(ch.stored), buffer)
	}
	return s, nil
}

// Events delivers the events in relay order; it is closed when the
// subscription ends (see Err).
func (s *Subscription) Events() <-chan *nostr.Event { return s.events }

// Err says why the subscription ended: nil while it runs or after Close.
func (s *Subscription) Err() error {
	s.ch.mu.Lock()
	defer s.ch.mu.Unlock()
	return s.err
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.ch.mu.Lock()
	defer s.ch.mu.Unlock()
	s.end(nil)
}

// deliver and end run under the channel's lock.
func (s *Subscription) deliver(ev *nostr.Event) {
	if s.ended {
		return
	}
	select {
	case s.events <- ev:
	default:
		s.end(ErrSlowSubscriber)
	}
}

func (s *Subscription) end(err error) {
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	delete(s.ch.inproc, s)
	close(s.events)
}
