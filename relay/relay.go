package relay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip11"
)

// ContainerURL is where agents inside a trial container reach the relay,
// through the tunnel; AUTH under it is accepted by default.
const ContainerURL = "ws://127.0.0.1:3600"

// ErrClosed is returned for work asked of a closed relay or channel.
var ErrClosed = errors.New("relay closed")

// Relay is the embedded relay. Create it with New, adjust its fields, then
// Open it; Close stops it and waits for every goroutine it started.
type Relay struct {
	// Addr is the TCP address to listen on; port 0 picks a free port.
	Addr string
	// AuthURLs are the URLs, besides the listen URL, that a NIP-42 AUTH
	// event may name in its relay tag: the in-container URL by default.
	AuthURLs []string
	// SecretKey signs the relay's own events (channel metadata and member
	// lists); Open generates one when it is empty.
	SecretKey string
	// MaxContentBytes bounds an event's content.
	MaxContentBytes int
	// MaxStoredEvents bounds the events each channel keeps in memory for
	// replay to new subscriptions; the transcript keeps all of them.
	MaxStoredEvents int
	// Skew is how far an event's created_at may be from the relay's clock.
	Skew time.Duration
	// EventRate and EventBurst limit the messages (EVENT and REQ) one
	// connection may send, per second and at once; a zero rate is no limit.
	EventRate  float64
	EventBurst int
	// SendQueue is how many messages may wait for one slow client before it
	// is disconnected.
	SendQueue int
	// Audit receives every refusal as a JSON line; nil discards them.
	Audit io.Writer
	// Logger receives connection-level diagnostics; nil discards them.
	Logger *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time

	ln       net.Listener
	srv      *http.Server
	url      string
	pubkey   string
	accepted []string
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	serveErr error

	mu         sync.Mutex
	open       bool
	closed     bool
	channels   map[string]*Channel
	identities map[string]*conn // authenticated pubkey -> its live connection
	nconns     int              // websocket connections open
	// unauth holds the open connections that have not authenticated, with
	// when they opened: the oldest make room for new ones (serveWebsocket).
	unauth    map[*conn]time.Time
	upgrading int // admitted, not yet in unauth
	maxConns  int // maxConnections, but for tests
	maxUnauth int // maxUnauthenticated, but for tests
	profiles  map[string]*nostr.Event

	auditMu sync.Mutex
}

// New returns a relay with troupe's defaults: loopback on a free port,
// AUTH accepted under the listen URL and ContainerURL, 64 KiB content,
// 10,000 stored events per channel, ±10 minutes of clock skew, 100 messages
// a second per connection (bursts of 200), 4,096 queued messages per client.
func New() *Relay {
	return &Relay{
		Addr:            "127.0.0.1:0",
		AuthURLs:        []string{ContainerURL},
		MaxContentBytes: 64 << 10,
		MaxStoredEvents: 10_000,
		Skew:            10 * time.Minute,
		EventRate:       100,
		EventBurst:      200,
		SendQueue:       4096,
		Now:             time.Now,
	}
}

// Open validates the configuration, listens and starts serving.
func (r *Relay) Open(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open || r.closed {
		return errors.New("relay: Open called twice")
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.MaxContentBytes <= 0 || r.MaxStoredEvents <= 0 || r.SendQueue <= 0 || r.Skew <= 0 {
		return errors.New("relay: MaxContentBytes, MaxStoredEvents, SendQueue and Skew must be positive")
	}
	if r.SecretKey == "" {
		r.SecretKey = nostr.GeneratePrivateKey()
	}
	pub, err := nostr.GetPublicKey(r.SecretKey)
	if err != nil {
		return fmt.Errorf("relay: secret key: %w", err)
	}
	r.pubkey = pub
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", r.Addr)
	if err != nil {
		return fmt.Errorf("relay: listen on %s: %w", r.Addr, err)
	}
	r.ln = ln
	r.url = "ws://" + ln.Addr().String()
	r.accepted = []string{normalizeURL(r.url)}
	for _, u := range r.AuthURLs {
		r.accepted = append(r.accepted, normalizeURL(u))
	}
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.channels = map[string]*Channel{}
	r.identities = map[string]*conn{}
	r.profiles = map[string]*nostr.Event{}
	r.unauth = map[*conn]time.Time{}
	r.maxConns = cmp.Or(r.maxConns, maxConnections)
	r.maxUnauth = cmp.Or(r.maxUnauth, maxUnauthenticated)
	// A connection that never upgrades holds a descriptor: it has 10 s for
	// its request's headers and a minute between requests.
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	r.open = true
	r.wg.Go(func() {
		if err := r.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			r.mu.Lock()
			r.serveErr = err
			r.mu.Unlock()
		}
	})
	return nil
}

// URL is the relay's websocket URL on the host (ws://host:port).
func (r *Relay) URL() string { return r.url }

// PublicKey is the key the relay signs its own events with.
func (r *Relay) PublicKey() string { return r.pubkey }

// Close closes every open channel (syncing their transcripts), disconnects
// every client and waits, within ctx, for every goroutine the relay started.
// It returns every error it met, joined.
func (r *Relay) Close(ctx context.Context) error {
	r.mu.Lock()
	if !r.open || r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	channels := make([]*Channel, 0, len(r.channels))
	for _, ch := range r.channels {
		channels = append(channels, ch)
	}
	r.mu.Unlock()

	var errs []error
	for _, ch := range channels {
		if err := r.CloseChannel(ch.cfg.ID); err != nil {
			errs = append(errs, err)
		}
	}
	// Shutdown stops the listener; hijacked websocket connections are ours
	// to end, through the shared context.
	if err := r.srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("relay: shut down http server: %w", err))
	}
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("relay: connections still closing: %w", ctx.Err()))
	}
	r.mu.Lock()
	if r.serveErr != nil {
		errs = append(errs, fmt.Errorf("relay: serve: %w", r.serveErr))
	}
	r.mu.Unlock()
	return errors.Join(errs...)
}

// ServeHTTP upgrades websocket requests to relay connections and answers
// NIP-11 information requests; anything else gets a short description.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.Header.Get("Upgrade") != "":
		r.serveWebsocket(w, req)
	case req.Header.Get("Accept") == "application/nostr+json":
		w.Header().Set("Content-Type", "application/nostr+json")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		json.NewEncoder(w).Encode(r.info())
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "troupe relay: connect a Nostr client to %s (NIP-42 AUTH required)\n", r.url)
	}
}

func (r *Relay) info() nip11.RelayInformationDocument {
	return nip11.RelayInformationDocument{
		Name:          "troupe",
		Description:   "troupe's trial relay: member-only channels for agent teams",
		PubKey:        r.pubkey,
		Software:      "https://github.com/troupebench/troupe",
		SupportedNIPs: []any{1, 11, 42},
		Limitation: &nip11.RelayLimitationDocument{
			MaxContentLength: r.MaxContentBytes,
			AuthRequired:     true,
			RestrictedWrites: true,
		},
	}
}

func (r *Relay) serveWebsocket(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if r.closed || !r.open {
		r.mu.Unlock()
		http.Error(w, "relay closed", http.StatusServiceUnavailable)
		return
	}
	if r.nconns >= r.maxConns || len(r.unauth)+r.upgrading >= r.maxUnauth {
		// The relay is shared by every trial of the job, and agents connect
		// and authenticate at once: a connection that has not after a while
		// is the likelier to be a flood, and gives way to the new one.
		victim := r.oldestUnauthenticated()
		if victim == nil {
			r.mu.Unlock()
			http.Error(w, fmt.Sprintf("the relay holds %d connections, its limit, all authenticated", r.maxConns), http.StatusServiceUnavailable)
			return
		}
		delete(r.unauth, victim)
		victim.cancel(errEvicted)
	}
	r.nconns++
	r.upgrading++
	// A connection's age counts from its request, not from when its
	// handler got past the upgrade: handlers run in any order, the
	// requests came in this one.
	opened := r.Now()
	r.wg.Add(1) // the reader: this handler's goroutine, until readLoop ends
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.nconns--
		r.mu.Unlock()
		r.wg.Done()
	}()

	ws, err := websocket.Accept(w, req, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		r.mu.Lock()
		r.upgrading--
		r.mu.Unlock()
		r.Logger.Debug("websocket upgrade failed", "remote", req.RemoteAddr, "err", err)
		return
	}
	// A content character may take 6 bytes escaped (\u0001), and the tags
	// up to maxTagBytes: a valid event always fits in a frame.
	ws.SetReadLimit(int64(r.MaxContentBytes)*6 + maxTagBytes*6 + 16<<10)
	c := newConn(r, ws, req.RemoteAddr)
	r.mu.Lock()
	r.upgrading--
	r.unauth[c] = opened
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.unauth, c)
		r.mu.Unlock()
	}()
	r.wg.Go(c.writeLoop)
	c.readLoop()
}

// oldestUnauthenticated returns the unauthenticated connection open the
// longest, nil when there is none; r.mu is held.
func (r *Relay) oldestUnauthenticated() *conn {
	var oldest *conn
	var at time.Time
	for c, t := range r.unauth {
		if oldest == nil || t.Before(at) {
			oldest, at = c, t
		}
	}
	return oldest
}

// channel returns an open channel.
func (r *Relay) channel(id string) (*Channel, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.channels[id]
	return ch, ok
}

// channelsOf lists the open channels pk is a member of.
func (r *Relay) channelsOf(pk string) []*Channel {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Channel
	for _, ch := range r.channels {
		if ch.isMember(pk) {
			out = append(out, ch)
		}
	}
	slices.SortFunc(out, func(a, b *Channel) int { return strings.Compare(a.cfg.ID, b.cfg.ID) })
	return out
}

// claimIdentity binds an authenticated key to a connection, unless another
// live connection holds it.
func (r *Relay) claimIdentity(pk string, c *conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if holder, ok := r.identities[pk]; ok && holder != c {
		return false
	}
	r.identities[pk] = c
	delete(r.unauth, c)
	return true
}

func (r *Relay) releaseIdentity(pk string, c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.identities[pk] == c {
		delete(r.identities, pk)
	}
}

// auditEntry is one refusal, as written to the audit logs.
type auditEntry struct {
	Time    time.Time `json:"time"`
	Channel string    `json:"channel,omitempty"`
	Pubkey  string    `json:"pubkey,omitempty"`
	Remote  string    `json:"remote,omitempty"`
	Message string    `json:"message"`
	ID      string    `json:"id,omitempty"`
	Reason  string    `json:"reason"`
	// Unverified: the pubkey is what an unauthenticated client claimed.
	Unverified bool `json:"pubkey_unverified,omitempty"`
}

// audit records a refusal in the relay's audit log and in the audit log of
// each channel it concerns, and counts it there.
func (r *Relay) audit(e auditEntry, channels []*Channel) {
	e.Time = r.Now().UTC()
	if r.Audit != nil {
		line, _ := json.Marshal(e)
		r.auditMu.Lock()
		r.Audit.Write(append(line, '\n'))
		r.auditMu.Unlock()
	}
	for _, ch := range channels {
		ce := e
		ce.Channel = ch.cfg.ID
		ch.recordRefusal(ce)
	}
}

// accept stores and delivers an event that passed every check. A profile
// goes to the channels its author is a member of.
func (r *Relay) accept(ev *nostr.Event, channel string) (duplicate bool, err error) {
	if ev.Kind == KindProfile {
		r.mu.Lock()
		if prev, ok := r.profiles[ev.PubKey]; ok && prev.ID == ev.ID {
			r.mu.Unlock()
			return true, nil
		}
		if prev, ok := r.profiles[ev.PubKey]; !ok || prev.CreatedAt <= ev.CreatedAt {
			r.profiles[ev.PubKey] = ev
		}
		r.mu.Unlock()
		var errs []error
		for _, ch := range r.channelsOf(ev.PubKey) {
			if _, err := ch.append(ev); err != nil {
				errs = append(errs, err)
			}
		}
		return false, errors.Join(errs...)
	}
	ch, ok := r.channel(channel)
	if !ok {
		return false, fmt.Errorf("channel %s is not open", channel)
	}
	return ch.append(ev)
}
