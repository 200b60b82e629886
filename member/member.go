// Package member is a team member's side of a trial channel: what every
// program that takes part in a trial as an agent does on the relay
// (docs/stacks.md, "What the agent does", steps 1 to 5).
//
// A Member connects to the relay and authenticates (NIP-42), learns the
// team from the channel's member list, follows the channel and remembers
// its recent messages, and sends messages with their mentions (teammate
// ids, roles, or "user") resolved to p tags. It reconnects when the
// connection drops. Troupe's reference agent (package agent) and the ACP
// bridge (package acpbridge) are both built on it, so the two take part in
// a channel in exactly the same way: one connection per identity.
package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/troupebench/troupe/channel"
)

// Kinds and tags of the relay's channels (package channel owns them).
const (
	KindMessage = channel.KindMessage
	KindMembers = channel.KindMembers
	// DonePrefix starts the orchestrator's message that ends a trial.
	DonePrefix = channel.DonePrefix
	// HistoryKept is how many channel messages a member remembers.
	HistoryKept = 200
	// TagForeignSender marks a message a member's bridge sent for another
	// process than its own agent's (channel.TagForeignSender).
	TagForeignSender = channel.TagForeignSender
)

// Config is what a member needs to take its place in a channel.
type Config struct {
	RelayURL  string
	Channel   string
	SecretKey string // hex; never logged
	PublicKey string
	// AgentID is the member's id when the contract gives it (its logger
	// then already says it); empty, the member list names it and the
	// logger gets an "agent" attribute.
	AgentID string
}

// Member is one identity's live place in a channel. New, set OnMessage,
// Open; Close ends it.
type Member struct {
	cfg Config
	log *slog.Logger
	// OnMessage, when set before Open, is called for every channel message
	// the first time it is seen (history included), in the relay's order,
	// after it was added to History. It runs on the connection's reader:
	// it must not block.
	OnMessage func(*nostr.Event)

	team     Team
	self     Participant
	reportTo string

	cancel    context.CancelFunc
	done      chan struct{} // closed when following ends
	err       error         // why, once done is closed
	following sync.WaitGroup
	bg        sync.WaitGroup // the subscription drainers, one per connection

	mu      sync.Mutex
	conn    *relayConn
	history []*nostr.Event
	seen    map[string]bool
}

// New prepares a member; it does no I/O.
func New(cfg Config, log *slog.Logger) *Member {
	return &Member{cfg: cfg, log: log, seen: map[string]bool{}, done: make(chan struct{})}
}

// FirstConnectWindow is how long the first connection is retried: the
// relay may not be reachable yet, or the connection may drop while it is
// made.
const FirstConnectWindow = 30 * time.Second

// Open connects (retrying for FirstConnectWindow), learns the team and
// subscribes to the channel, then follows it until ctx ends or Close:
// a dropped connection is made again, with backoff.
func (m *Member) Open(ctx context.Context) error {
	first, cancelFirst := context.WithTimeout(ctx, FirstConnectWindow)
	err := m.connectRetrying(first)
	cancelFirst()
	if err != nil {
		close(m.done)
		m.err = err
		return err
	}
	ctx, m.cancel = context.WithCancel(ctx)
	m.following.Go(func() {
		m.err = m.follow(ctx)
		close(m.done)
	})
	return nil
}

// Done is closed when the member stops following the channel: its context
// ended, or Close was called.
func (m *Member) Done() <-chan struct{} { return m.done }

// Err says why following ended, once Done is closed.
func (m *Member) Err() error {
	<-m.done
	return m.err
}

// Close stops following, closes the connection and waits for every
// goroutine the member started. They are stopped by then, so the wait is
// short; ctx bounds it all the same, as it bounds every Close here: when
// it ends first, Close still closes the connection, and says what was
// still running.
func (m *Member) Close(ctx context.Context) error {
	var err error
	if m.cancel != nil {
		m.cancel()
		// Following ends first: it may be making a new connection.
		select {
		case <-m.done:
			m.following.Wait() // it has closed done: its last step
		case <-ctx.Done():
			err = fmt.Errorf("close the member: following the channel had not ended: %w", context.Cause(ctx))
		}
	}
	m.mu.Lock()
	if m.conn != nil {
		m.conn.Close()
	}
	m.mu.Unlock()
	if err != nil {
		return err // the drainers end with their connection, unwaited
	}
	m.bg.Wait() // the drainers end with their connection
	return nil
}

// Team is the channel's member list, known once Open returned; it does
// not change afterwards.
func (m *Member) Team() *Team { return &m.team }

// Self is this member's own entry in the member list.
func (m *Member) Self() Participant { return m.self }

// ReportTo is whom a failure report goes to: the orchestrator, or the
// user when this member is the orchestrator.
func (m *Member) ReportTo() string { return m.reportTo }

// Log is the member's logger, naming the agent once the team is known.
func (m *Member) Log() *slog.Logger { return m.log }

// History is a copy of the channel's recent messages, oldest first (at
// most HistoryKept).
func (m *Member) History() []*nostr.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.history)
}

// Mentions says whether ev is a teammate's message that mentions this
// member (a p tag with its key).
func (m *Member) Mentions(ev *nostr.Event) bool {
	return ev.PubKey != m.cfg.PublicKey && ev.Tags.ContainsAny("p", []string{m.cfg.PublicKey})
}

// connect dials the relay, learns the team, and subscribes to the channel.
func (m *Member) connect(ctx context.Context) error {
	conn, err := dialRelay(ctx, m.cfg.RelayURL, m.cfg.SecretKey, m.cfg.PublicKey)
	if err != nil {
		return err
	}
	// The member list is behind AUTH too: subscribing first gets the
	// challenge (NIP-42 is lazy here).
	sub, err := conn.subscribe(ctx, nostr.Filter{Kinds: []int{KindMessage}, Tags: nostr.TagMap{"h": {m.cfg.Channel}}, Limit: HistoryKept})
	if err != nil {
		conn.Close()
		return fmt.Errorf("subscribe to channel %s: %w", m.cfg.Channel, err)
	}
	if len(m.team.Members) == 0 {
		if err := m.loadTeam(ctx, conn); err != nil {
			conn.Close()
			return err
		}
	}
	m.mu.Lock()
	if m.conn != nil {
		m.conn.Close() // the lost one: its reader has ended; release it
	}
	m.conn = conn
	m.mu.Unlock()
	m.log.Info("connected", "relay", m.cfg.RelayURL, "channel", m.cfg.Channel)
	m.bg.Go(func() { m.drain(sub) }) // ends when the connection does
	return nil
}

func (m *Member) loadTeam(ctx context.Context, conn *relayConn) error {
	evs, err := conn.query(ctx, nostr.Filter{Kinds: []int{KindMembers}, Tags: nostr.TagMap{"d": {m.cfg.Channel}}})
	if err != nil {
		return fmt.Errorf("read the member list of %s: %w", m.cfg.Channel, err)
	}
	if len(evs) == 0 {
		return fmt.Errorf("channel %s has no member list", m.cfg.Channel)
	}
	for _, t := range evs[0].Tags {
		if len(t) >= 2 && t[0] == "p" {
			p := Participant{Pubkey: t[1]}
			if len(t) >= 4 {
				p.ID = t[3]
			}
			if len(t) >= 5 {
				p.Role = t[4]
			}
			if len(t) >= 6 {
				p.Kind = t[5]
			}
			m.team.Members = append(m.team.Members, p)
		}
	}
	me := m.team.ByPubkey(m.cfg.PublicKey)
	if me == nil {
		return fmt.Errorf("this agent's key is not a member of channel %s", m.cfg.Channel)
	}
	m.self = *me
	if m.cfg.AgentID == "" { // the caller names the logger when the id is given
		m.log = m.log.With("agent", me.ID)
	}
	// Failures are reported to the orchestrator, or, by the orchestrator,
	// to the user.
	m.reportTo = "user"
	for _, p := range m.team.Members {
		if p.Kind == "orchestrator" && p.Pubkey != m.cfg.PublicKey {
			m.reportTo = p.ID
		}
	}
	m.log.Info("team", "self", me.ID, "role", me.Role, "kind", me.Kind, "members", m.team.Describe())
	return nil
}

// drain moves a subscription's events into the member's state.
func (m *Member) drain(sub *subscription) {
	for ev := range sub.events {
		m.receive(ev)
	}
}

// receive remembers a channel message, once, and passes it on.
func (m *Member) receive(ev *nostr.Event) {
	m.mu.Lock()
	if m.seen[ev.ID] {
		m.mu.Unlock()
		return
	}
	m.seen[ev.ID] = true
	m.history = append(m.history, ev)
	if len(m.history) > HistoryKept {
		m.history = slices.Delete(m.history, 0, len(m.history)-HistoryKept)
	}
	m.mu.Unlock()
	if m.OnMessage != nil {
		m.OnMessage(ev)
	}
}

// follow watches the connection and reconnects when it drops, until ctx ends.
func (m *Member) follow(ctx context.Context) error {
	for {
		m.mu.Lock()
		done := m.conn.Done()
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
		}
		m.log.Warn("relay connection lost; reconnecting")
		// A moment first: the relay releases this key's identity when it
		// sees the old connection end, and an AUTH before that is refused
		// and counted as an identity conflict in the trial's result.
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return err
		}
		if err := m.connectRetrying(ctx); err != nil {
			return err
		}
	}
}

// connectRetrying connects, retrying with backoff until ctx ends; it
// returns the last failure then.
func (m *Member) connectRetrying(ctx context.Context) error {
	backoff := 500 * time.Millisecond
	for {
		err := m.connect(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		m.log.Warn("connect failed", "err", err.Error(), "retry_in", backoff.String())
		if sleepCtx(ctx, backoff) != nil {
			return err
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// Send publishes a channel message with the mentions (teammate ids, roles,
// "user", or members' keys) resolved to p tags, and the extra tags, and
// returns it once the relay accepted it. An unknown mention sends nothing.
func (m *Member) Send(ctx context.Context, content string, mentions []string, extra ...nostr.Tag) (*nostr.Event, error) {
	if strings.TrimSpace(content) == "" {
		return nil, errors.New("the message is empty")
	}
	pks, err := m.team.ResolveMentions(mentions)
	if err != nil {
		return nil, err
	}
	ev := nostr.Event{Kind: KindMessage, CreatedAt: nostr.Now(), Content: content, Tags: nostr.Tags{{"h", m.cfg.Channel}}}
	for _, pk := range pks {
		ev.Tags = append(ev.Tags, nostr.Tag{"p", pk})
	}
	ev.Tags = append(ev.Tags, extra...)
	if err := ev.Sign(m.cfg.SecretKey); err != nil {
		return nil, err
	}
	m.mu.Lock()
	conn := m.conn
	m.mu.Unlock()
	if conn == nil {
		return nil, errors.New("not connected to the relay")
	}
	if err := conn.publish(ctx, ev); err != nil {
		return nil, err
	}
	m.log.Info("sent", "event", ev.ID, "mentions", strings.Join(mentions, ","), "done", strings.HasPrefix(content, DonePrefix))
	return &ev, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
