package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/internal/secret"
)

// maxSubscriptions bounds the live subscriptions of one connection.
const maxSubscriptions = 32

// conn is one client connection. Only its reader goroutine touches its
// state, except send (the writer drains it, channels fill it) and ctx.
type conn struct {
	r         *Relay
	ws        *websocket.Conn
	remote    string
	challenge string
	pubkey    string      // authenticated key, "" before AUTH
	authed    atomic.Bool // pubkey is set: read by the unauthenticated timer
	subs      map[string]*subscription
	bucket    tokenBucket
	parser    nostr.MessageParser

	send   chan outFrame
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// outFrame is one message waiting for the writer. For an event, payload is
// the event's JSON, shared by every subscriber, and sub the subscription id
// already JSON-quoted; the writer joins them. Otherwise payload is the whole
// message.
type outFrame struct {
	sub     string
	payload []byte
	event   bool
}

var (
	errTooSlow = errors.New("the client did not read its messages fast enough")
	errNoAuth  = errors.New("the client did not authenticate in time")
	errEvicted = errors.New("the relay was full: the oldest connection that had not authenticated made room for a new one")
)

func newConn(r *Relay, ws *websocket.Conn, remote string) *conn {
	challenge := make([]byte, 16)
	rand.Read(challenge)
	c := &conn{
		r:         r,
		ws:        ws,
		remote:    remote,
		challenge: hex.EncodeToString(challenge),
		subs:      map[string]*subscription{},
		bucket:    tokenBucket{rate: r.EventRate, burst: float64(max(r.EventBurst, 1))},
		parser:    nostr.NewMessageParser(),
		send:      make(chan outFrame, r.SendQueue),
	}
	c.ctx, c.cancel = context.WithCancelCause(r.ctx)
	return c
}

// enqueue hands a message to the writer without blocking; a client whose
// queue is full is disconnected, so one slow reader never holds up the
// others.
func (c *conn) enqueue(f outFrame) bool {
	select {
	case c.send <- f:
		return true
	default:
		c.cancel(errTooSlow)
		return false
	}
}

func (c *conn) sendJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	c.enqueue(outFrame{payload: b})
}

// writeLoop sends queued messages until the connection ends.
func (c *conn) writeLoop() {
	buf := make([]byte, 0, 4096)
	for {
		select {
		case <-c.ctx.Done():
			return
		case f := <-c.send:
			msg := f.payload
			if f.event {
				buf = append(buf[:0], `["EVENT",`...)
				buf = append(buf, f.sub...)
				buf = append(buf, ',')
				buf = append(buf, f.payload...)
				buf = append(buf, ']')
				msg = buf
			}
			if err := c.ws.Write(c.ctx, websocket.MessageText, msg); err != nil {
				c.cancel(err)
				return
			}
		}
	}
}

// readLoop handles the client's messages in order until the connection ends,
// then releases everything the connection held.
func (c *conn) readLoop() {
	defer c.finish()
	// A connection that never authenticates holds a queue and a slot: it
	// has a minute to.
	noAuth := time.AfterFunc(unauthenticatedTTL, func() {
		if !c.authed.Load() {
			c.cancel(errNoAuth)
		}
	})
	defer noAuth.Stop()
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			c.cancel(err)
			return
		}
		if typ != websocket.MessageText {
			c.sendJSON(nostr.NoticeEnvelope("invalid: binary messages are not understood; send JSON text"))
			continue
		}
		c.handle(string(data))
	}
}

func (c *conn) finish() {
	// The key is free before its subscriptions go: an agent seen leaving
	// the channel (Readiness) may connect again at once (a multi-step
	// trial relaunches its team).
	if c.pubkey != "" {
		c.r.releaseIdentity(c.pubkey, c)
	}
	for id := range c.subs {
		c.dropSub(id)
	}
	cause := context.Cause(c.ctx)
	if errors.Is(cause, errTooSlow) {
		c.r.audit(auditEntry{Pubkey: c.pubkey, Remote: c.remote, Message: "connection", Reason: PrefixRateLimited + " disconnected: " + errTooSlow.Error()}, c.r.channelsOf(c.pubkey))
	}
	if errors.Is(cause, errEvicted) {
		c.r.audit(auditEntry{Remote: c.remote, Message: "connection", Reason: PrefixRestricted + " disconnected: " + errEvicted.Error()}, nil)
	}
	c.cancel(nil)
	// No closing handshake: a client this far gone may never answer it.
	c.ws.CloseNow()
	c.r.Logger.Debug("connection closed", "remote", c.remote, "pubkey", c.pubkey, "cause", cause)
}

func (c *conn) handle(msg string) {
	env, err := c.parser.ParseMessage(msg)
	if err != nil || env == nil {
		c.sendJSON(nostr.NoticeEnvelope("invalid: could not parse the message as a NIP-01 envelope"))
		return
	}
	switch env := env.(type) {
	case *nostr.EventEnvelope:
		c.handleEvent(&env.Event)
	case *nostr.ReqEnvelope:
		c.handleReq(env.SubscriptionID, env.Filters)
	case *nostr.CloseEnvelope:
		c.dropSub(string(*env))
	case *nostr.AuthEnvelope:
		c.handleAuth(&env.Event)
	case *nostr.CountEnvelope:
		c.sendJSON(nostr.ClosedEnvelope{SubscriptionID: env.SubscriptionID, Reason: "unsupported: COUNT is not supported"})
	default:
		c.sendJSON(nostr.NoticeEnvelope("invalid: clients send EVENT, REQ, CLOSE or AUTH"))
	}
}

// requireAuth sends this connection's challenge (NIP-42, lazily: only in
// reply to a message that needs it) and says whether the client has
// authenticated.
func (c *conn) requireAuth() bool {
	if c.pubkey != "" {
		return true
	}
	challenge := c.challenge
	c.sendJSON(nostr.AuthEnvelope{Challenge: &challenge})
	return false
}

// refuseEvent records the refusal before the client hears it, so a client
// that has its answer can rely on the audit log holding it. A refusal on a
// connection that has not authenticated is the relay's alone: the pubkey it
// claims is unproven, and must not put entries in a member's name into a
// channel's audit log.
func (c *conn) refuseEvent(ev *nostr.Event, r refusal, channels []*Channel) {
	e := auditEntry{Pubkey: c.pubkey, Remote: c.remote, Message: "EVENT", ID: ev.ID, Reason: string(r)}
	if c.pubkey == "" {
		e.Pubkey, e.Unverified, channels = ev.PubKey, true, nil
	}
	c.r.audit(e, channels)
	c.sendJSON(nostr.OKEnvelope{EventID: ev.ID, OK: false, Reason: string(r)})
}

func (c *conn) handleEvent(ev *nostr.Event) {
	now := c.r.Now()
	named := c.namedChannels(ev)
	if !c.bucket.allow(now) {
		c.refuseEvent(ev, refuse(PrefixRateLimited, "slow down: at most %g messages a second", c.r.EventRate), named)
		return
	}
	if !c.requireAuth() {
		c.refuseEvent(ev, refuse(PrefixAuthRequired, "authenticate (NIP-42) before publishing"), named)
		return
	}
	if !ev.CheckID() {
		c.refuseEvent(ev, refuse(PrefixInvalid, "the event id does not match its content"), named)
		return
	}
	if ok, err := ev.CheckSignature(); err != nil || !ok {
		c.refuseEvent(ev, refuse(PrefixInvalid, "the signature does not verify"), named)
		return
	}
	if ev.PubKey != c.pubkey {
		c.refuseEvent(ev, refuse(PrefixRestricted, "the event is signed by %s but this connection authenticated as %s", ev.PubKey, c.pubkey), named)
		return
	}
	c.publish(ev, now, named)
}

// publish applies the relay's rules to an authenticated event and accepts it.
func (c *conn) publish(ev *nostr.Event, now time.Time, named []*Channel) {
	channel, r := checkEvent(ev, now, c.r.Skew, c.r.MaxContentBytes)
	if r == "" {
		r = c.r.checkMembership(ev, channel)
	}
	if r == "" {
		r = c.r.checkSecrets(ev, channel)
	}
	if r != "" {
		c.refuseEvent(ev, r, cmpChannels(named, c.r.channelsOf(c.pubkey)))
		return
	}
	dup, err := c.r.accept(ev, channel)
	switch {
	case err != nil:
		c.refuseEvent(ev, refuse(PrefixError, "the relay could not record the event: %v", err), named)
	case dup:
		c.sendJSON(nostr.OKEnvelope{EventID: ev.ID, OK: true, Reason: PrefixDuplicate + " already have this event"})
	default:
		c.sendJSON(nostr.OKEnvelope{EventID: ev.ID, OK: true})
	}
}

func cmpChannels(a, b []*Channel) []*Channel {
	if len(a) > 0 {
		return a
	}
	return b
}

// namedChannels lists the open channels an event's h tags name, for
// attributing a refusal.
func (c *conn) namedChannels(ev *nostr.Event) []*Channel {
	var out []*Channel
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "h" {
			if ch, ok := c.r.channel(t[1]); ok && !slices.Contains(out, ch) {
				out = append(out, ch)
			}
		}
	}
	return out
}

// checkMembership refuses an event whose author may not write where it
// writes: a channel message needs an open channel the author belongs to; a
// profile needs its author to belong to some open channel.
func (r *Relay) checkMembership(ev *nostr.Event, channel string) refusal {
	if ev.Kind == KindProfile {
		if len(r.channelsOf(ev.PubKey)) == 0 {
			return refuse(PrefixRestricted, "profiles are accepted from members of open channels only")
		}
		return ""
	}
	ch, ok := r.channel(channel)
	if !ok {
		return refuse(PrefixRestricted, "channel %s is not open", channel)
	}
	if !ch.isMember(ev.PubKey) {
		return refuse(PrefixRestricted, "%s is not a member of channel %s", ev.PubKey, channel)
	}
	return ""
}

// checkSecrets refuses an event that carries a secret minted for a trial it
// would be recorded in: a channel message, its channel's; a profile, those
// of every channel of its author. The secret is not quoted, only named.
func (r *Relay) checkSecrets(ev *nostr.Event, channel string) refusal {
	chans := r.channelsOf(ev.PubKey)
	if ev.Kind != KindProfile {
		chans = nil
		if ch, ok := r.channel(channel); ok {
			chans = []*Channel{ch}
		}
	}
	for _, ch := range chans {
		if carriesSecret(ev, ch.cfg.Secrets) {
			return refuse(PrefixRestricted, "the event carries a secret key or token minted for this trial; "+
				"it would be published in the channel and written to the trial's record: send the message without it")
		}
	}
	return ""
}

func carriesSecret(ev *nostr.Event, s *secret.Scrubber) bool {
	if s.Empty() {
		return false
	}
	if s.Contains([]byte(ev.Content)) {
		return true
	}
	for _, t := range ev.Tags {
		for _, v := range t {
			if s.Contains([]byte(v)) {
				return true
			}
		}
	}
	return false
}

func (c *conn) handleAuth(ev *nostr.Event) {
	now := c.r.Now()
	verified := false // the signature is the key's: its channels may hear of it
	fail := func(r refusal) {
		e := auditEntry{Pubkey: ev.PubKey, Remote: c.remote, Message: "AUTH", ID: ev.ID, Reason: string(r), Unverified: !verified}
		var channels []*Channel
		if verified {
			channels = c.r.channelsOf(ev.PubKey)
		}
		c.r.audit(e, channels)
		c.sendJSON(nostr.OKEnvelope{EventID: ev.ID, OK: false, Reason: string(r)})
	}
	// AUTH costs a signature check: it is rate-limited like the rest.
	if !c.bucket.allow(now) {
		fail(refuse(PrefixRateLimited, "slow down: at most %g messages a second", c.r.EventRate))
		return
	}
	switch {
	case c.pubkey != "" && c.pubkey == ev.PubKey && ev.CheckID():
		c.sendJSON(nostr.OKEnvelope{EventID: ev.ID, OK: true})
		return
	case c.pubkey != "":
		fail(refuse(PrefixRestricted, "this connection is already authenticated as %s; open another connection for another key", c.pubkey))
		return
	case ev.Kind != nostr.KindClientAuthentication:
		fail(refuse(PrefixInvalid, "an AUTH event has kind 22242, not %d", ev.Kind))
		return
	case !ev.CheckID():
		fail(refuse(PrefixInvalid, "the event id does not match its content"))
		return
	}
	if ok, err := ev.CheckSignature(); err != nil || !ok {
		fail(refuse(PrefixInvalid, "the signature does not verify"))
		return
	}
	verified = true
	if t := ev.Tags.Find("challenge"); t == nil || t[1] != c.challenge {
		fail(refuse(PrefixInvalid, "the challenge does not match this connection's AUTH challenge"))
		return
	}
	t := ev.Tags.Find("relay")
	if t == nil || !slices.Contains(c.r.accepted, normalizeURL(t[1])) {
		named := ""
		if t != nil {
			named = t[1]
		}
		fail(refuse(PrefixInvalid, "the relay tag %q is not a URL of this relay; it accepts %v", named, c.r.accepted))
		return
	}
	if d := now.Sub(ev.CreatedAt.Time()); d > c.r.Skew || d < -c.r.Skew {
		fail(refuse(PrefixInvalid, "created_at is %s from the relay's clock", d))
		return
	}
	if !c.r.claimIdentity(ev.PubKey, c) {
		chans := c.r.channelsOf(ev.PubKey)
		for _, ch := range chans {
			ch.recordIdentityConflict()
		}
		fail(refuse(PrefixRestricted, "identity conflict: %s is already connected; a key may hold one connection at a time", ev.PubKey))
		return
	}
	c.pubkey = ev.PubKey
	c.authed.Store(true)
	c.sendJSON(nostr.OKEnvelope{EventID: ev.ID, OK: true})
}

func (c *conn) refuseReq(id string, r refusal, channels []*Channel) {
	c.r.audit(auditEntry{Pubkey: c.pubkey, Remote: c.remote, Message: "REQ", ID: id, Reason: string(r)}, channels)
	c.sendJSON(nostr.ClosedEnvelope{SubscriptionID: id, Reason: string(r)})
}

// handleReq opens (or replaces) a subscription once every check passed:
// what is stored and matches is sent, then EOSE; later events come as
// they are accepted.
func (c *conn) handleReq(id string, filters nostr.Filters) {
	if r := c.checkReq(id, filters); r != "" {
		c.refuseReq(id, r, nil)
		return
	}
	plans, ok := c.planReq(id, filters)
	if !ok {
		return
	}
	if _, replacing := c.subs[id]; !replacing && len(c.subs) >= maxSubscriptions {
		c.refuseReq(id, refuse(PrefixRestricted, "at most %d subscriptions per connection", maxSubscriptions), nil)
		return
	}
	c.dropSub(id)
	quoted, _ := json.Marshal(id)
	sub := &subscription{id: id, quoted: string(quoted), conn: c, filters: map[*Channel][]nostr.Filter{}}
	for _, p := range plans {
		for _, ch := range p.channels {
			sub.filters[ch] = append(sub.filters[ch], p.filter)
		}
	}
	c.subs[id] = sub
	c.serveStored(sub, plans)
	for ch, fs := range sub.filters {
		if !ch.subscribe(sub, fs) {
			delete(sub.filters, ch)
		}
	}
	eose := nostr.EOSEEnvelope(id)
	c.sendJSON(eose)
}

// checkReq runs a REQ's checks that need no channel, in order: the rate,
// authentication, the subscription id, the number of filters and their
// size. It returns the first refusal, or "".
func (c *conn) checkReq(id string, filters nostr.Filters) refusal {
	switch {
	case !c.bucket.allow(c.r.Now()):
		return refuse(PrefixRateLimited, "slow down: at most %g messages a second", c.r.EventRate)
	case !c.requireAuth():
		return refuse(PrefixAuthRequired, "authenticate (NIP-42) before subscribing")
	case id == "" || len(id) > 64:
		return refuse(PrefixInvalid, "a subscription id is 1 to 64 characters")
	case len(filters) == 0 || len(filters) > maxFilters:
		return refuse(PrefixInvalid, "a REQ has 1 to %d filters; this one has %d", maxFilters, len(filters))
	}
	for _, f := range filters {
		n := len(f.IDs) + len(f.Authors) + len(f.Kinds)
		for _, vs := range f.Tags {
			n += len(vs)
		}
		if n > maxFilterValues {
			return refuse(PrefixInvalid, "a filter lists %d ids, authors, kinds and tag values; the limit is %d", n, maxFilterValues)
		}
	}
	return ""
}

// reqPlan is one filter of a REQ, checked: its shape and the channels it
// reads.
type reqPlan struct {
	shape    filterShape
	filter   nostr.Filter
	channels []*Channel
}

// planReq checks every filter before anything is served: one refused
// filter refuses the whole subscription (planReq says so, and returns
// false).
func (c *conn) planReq(id string, filters nostr.Filters) ([]reqPlan, bool) {
	plans := make([]reqPlan, 0, len(filters))
	for _, f := range filters {
		shape, ids, r := classifyFilter(f)
		if r != "" {
			c.refuseReq(id, r, c.r.channelsOf(c.pubkey))
			return nil, false
		}
		p := reqPlan{shape: shape, filter: f}
		for _, chID := range ids {
			ch, ok := c.r.channel(chID)
			switch {
			case !ok:
				c.refuseReq(id, refuse(PrefixRestricted, "channel %s is not open", chID), nil)
				return nil, false
			case !ch.isMember(c.pubkey):
				c.refuseReq(id, refuse(PrefixRestricted, "%s is not a member of channel %s", c.pubkey, chID), []*Channel{ch})
				return nil, false
			}
			p.channels = append(p.channels, ch)
		}
		plans = append(plans, p)
	}
	return plans, true
}

// serveStored sends what a new subscription's filters match of the stored
// events: channel metadata and co-members' profiles. Channel messages come
// from the channels themselves, as they subscribe it.
func (c *conn) serveStored(sub *subscription, plans []reqPlan) {
	for _, p := range plans {
		switch p.shape {
		case shapeMetadata:
			for _, ch := range p.channels {
				for _, ev := range ch.meta {
					if p.filter.Matches(ev) {
						c.enqueue(outFrame{sub: sub.quoted, payload: mustJSON(ev), event: true})
					}
				}
			}
		case shapeProfiles:
			for _, ev := range c.r.coMemberProfiles(c.pubkey) {
				if p.filter.Matches(ev) {
					c.enqueue(outFrame{sub: sub.quoted, payload: mustJSON(ev), event: true})
				}
			}
		}
	}
}

// dropSub ends a subscription, if it exists.
func (c *conn) dropSub(id string) {
	sub, ok := c.subs[id]
	if !ok {
		return
	}
	delete(c.subs, id)
	for ch := range sub.filters {
		ch.unsubscribe(sub)
	}
}

func mustJSON(ev *nostr.Event) []byte {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err) // an event always marshals
	}
	return b
}

// coMemberProfiles lists the profiles of everyone who shares an open channel
// with pk.
func (r *Relay) coMemberProfiles(pk string) []*nostr.Event {
	seen := map[string]bool{}
	var out []*nostr.Event
	for _, ch := range r.channelsOf(pk) {
		for _, m := range ch.memberKeys() {
			if seen[m] {
				continue
			}
			seen[m] = true
			r.mu.Lock()
			ev, ok := r.profiles[m]
			r.mu.Unlock()
			if ok {
				out = append(out, ev)
			}
		}
	}
	return out
}
