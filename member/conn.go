package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// relayConn is one connection to the relay: the agent's small NIP-01 and
// NIP-42 client. One goroutine reads and sorts what the relay sends; it ends
// with the connection, and Close waits for it.
type relayConn struct {
	url    string
	sk, pk string
	ws     *websocket.Conn
	done   chan struct{}

	mu        sync.Mutex
	challenge string
	gotAUTH   chan struct{} // closed and replaced when a challenge arrives
	oks       map[string]chan string
	subs      map[string]*subscription
	seq       int
}

// subscription is one REQ's replies.
type subscription struct {
	id     string
	events chan *nostr.Event
	eose   chan struct{}
	closed chan string
	ended  bool
}

// errRefused is a relay's refusal, with its machine prefix.
type errRefused struct{ reason string }

func (e *errRefused) Error() string { return "relay refused: " + e.reason }

func authRequired(err error) bool {
	r, ok := errors.AsType[*errRefused](err)
	return ok && strings.HasPrefix(r.reason, "auth-required:")
}

func dialRelay(ctx context.Context, url, sk, pk string) (*relayConn, error) {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to the relay at %s: %w", url, err)
	}
	ws.SetReadLimit(4 << 20)
	r := &relayConn{url: url, sk: sk, pk: pk, ws: ws, done: make(chan struct{}), gotAUTH: make(chan struct{}), oks: map[string]chan string{}, subs: map[string]*subscription{}}
	go r.read()
	return r, nil
}

// Close ends the connection and waits for the reader.
func (r *relayConn) Close() {
	r.ws.CloseNow()
	<-r.done
}

// Done is closed when the connection has ended.
func (r *relayConn) Done() <-chan struct{} { return r.done }

func (r *relayConn) read() {
	defer func() {
		r.mu.Lock()
		for _, s := range r.subs {
			r.endSub(s, "connection closed")
		}
		r.mu.Unlock()
		close(r.done)
	}()
	for {
		_, data, err := r.ws.Read(context.Background())
		if err != nil {
			return
		}
		if s, ev := r.handle(data); ev != nil {
			s.events <- ev // the consumer drains; backpressure reaches the relay
		}
	}
}

// handle sorts one message from the relay; an event for a live
// subscription is returned for the reader to deliver outside the lock.
// Messages it does not understand are dropped.
func (r *relayConn) handle(data []byte) (*subscription, *nostr.Event) {
	var msg []json.RawMessage
	if json.Unmarshal(data, &msg) != nil || len(msg) < 2 {
		return nil, nil
	}
	var label, first string
	json.Unmarshal(msg[0], &label)
	json.Unmarshal(msg[1], &first)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch label {
	case "AUTH":
		r.challenge = first
		close(r.gotAUTH)
		r.gotAUTH = make(chan struct{})
	case "OK":
		accepted, reason := false, ""
		if len(msg) > 2 {
			json.Unmarshal(msg[2], &accepted)
		}
		if len(msg) > 3 {
			json.Unmarshal(msg[3], &reason)
		}
		if ch, ok := r.oks[first]; ok {
			if accepted && reason == "" {
				reason = "ok"
			} else if accepted {
				reason = "ok " + reason
			} else if reason == "" {
				reason = "refused without a reason"
			}
			ch <- reason
			delete(r.oks, first)
		}
	case "EVENT":
		var ev nostr.Event
		if s, ok := r.subs[first]; ok && !s.ended && len(msg) > 2 && json.Unmarshal(msg[2], &ev) == nil {
			return s, &ev
		}
	case "EOSE":
		if s, ok := r.subs[first]; ok {
			select {
			case <-s.eose:
			default:
				close(s.eose)
			}
		}
	case "CLOSED":
		var reason string
		if len(msg) > 2 {
			json.Unmarshal(msg[2], &reason)
		}
		if s, ok := r.subs[first]; ok {
			r.endSub(s, reason)
			delete(r.subs, first)
		}
	}
	return nil, nil
}

// endSub ends a subscription once; it runs under mu.
func (r *relayConn) endSub(s *subscription, reason string) {
	if s.ended {
		return
	}
	s.ended = true
	s.closed <- reason
	close(s.events)
}

func (r *relayConn) send(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return r.ws.Write(wctx, websocket.MessageText, b)
}

// request sends an envelope carrying ev and waits for its OK.
func (r *relayConn) request(ctx context.Context, label string, ev nostr.Event) error {
	ch := make(chan string, 1)
	r.mu.Lock()
	r.oks[ev.ID] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.oks, ev.ID)
		r.mu.Unlock()
	}()
	if err := r.send(ctx, []any{label, ev}); err != nil {
		return fmt.Errorf("send %s: %w", label, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	select {
	case reason := <-ch:
		if strings.HasPrefix(reason, "ok") {
			return nil
		}
		return &errRefused{reason: reason}
	case <-r.done:
		return errors.New("the relay connection closed before it answered")
	case <-wctx.Done():
		return fmt.Errorf("no answer to %s: %w", label, wctx.Err())
	}
}

// auth answers the connection's challenge, waiting briefly for one to
// arrive: the relay sends it in reply to the message that needed it.
func (r *relayConn) auth(ctx context.Context) error {
	r.mu.Lock()
	challenge, wait := r.challenge, r.gotAUTH
	r.mu.Unlock()
	if challenge == "" {
		select {
		case <-wait:
		case <-r.done:
			return errors.New("the relay connection closed before it sent a challenge")
		case <-time.After(10 * time.Second):
			return errors.New("the relay sent no AUTH challenge")
		}
		r.mu.Lock()
		challenge = r.challenge
		r.mu.Unlock()
	}
	ev := nostr.Event{Kind: nostr.KindClientAuthentication, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"relay", r.url}, {"challenge", challenge}}}
	if err := ev.Sign(r.sk); err != nil {
		return err
	}
	if err := r.request(ctx, "AUTH", ev); err != nil {
		return fmt.Errorf("authenticate: %w", err)
	}
	return nil
}

// publish sends a signed event and waits for the relay to accept it,
// authenticating first if the relay asks.
func (r *relayConn) publish(ctx context.Context, ev nostr.Event) error {
	err := r.request(ctx, "EVENT", ev)
	if authRequired(err) {
		if err := r.auth(ctx); err != nil {
			return err
		}
		err = r.request(ctx, "EVENT", ev)
	}
	return err
}

// subscribe sends a REQ and waits for its stored events to end (EOSE),
// authenticating first if the relay asks. Events flow on s.events.
func (r *relayConn) subscribe(ctx context.Context, filters ...nostr.Filter) (*subscription, error) {
	for attempt := 0; ; attempt++ {
		s := r.newSub("s")
		req := []any{"REQ", s.id}
		for _, f := range filters {
			req = append(req, f)
		}
		if err := r.send(ctx, req); err != nil {
			return nil, fmt.Errorf("subscribe: %w", err)
		}
		select {
		case <-s.eose:
			return s, nil
		case reason := <-s.closed:
			if strings.HasPrefix(reason, "auth-required:") && attempt == 0 {
				if err := r.auth(ctx); err != nil {
					return nil, err
				}
				continue
			}
			return nil, &errRefused{reason: reason}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// newSub registers a subscription under a new id.
func (r *relayConn) newSub(prefix string) *subscription {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	s := &subscription{id: prefix + strconv.Itoa(r.seq), events: make(chan *nostr.Event, 256), eose: make(chan struct{}), closed: make(chan string, 1)}
	r.subs[s.id] = s
	return s
}

// query returns the stored events a filter matches.
func (r *relayConn) query(ctx context.Context, f nostr.Filter) ([]*nostr.Event, error) {
	s := r.newSub("q")
	defer func() {
		r.mu.Lock()
		delete(r.subs, s.id)
		r.mu.Unlock()
		r.send(context.WithoutCancel(ctx), []any{"CLOSE", s.id})
	}()
	if err := r.send(ctx, []any{"REQ", s.id, f}); err != nil {
		return nil, err
	}
	var out []*nostr.Event
	for {
		select {
		case ev, ok := <-s.events:
			if ok {
				out = append(out, ev)
			}
		case <-s.eose:
			// Events sent before EOSE may still sit in the channel.
			for {
				select {
				case ev := <-s.events:
					if ev != nil {
						out = append(out, ev)
					}
				default:
					return out, nil
				}
			}
		case reason := <-s.closed:
			return nil, &errRefused{reason: reason}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
