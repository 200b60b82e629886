package relay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// client is what the relay tests need from a Nostr client. Two implement it:
// go-nostr's own client, and rawClient, a minimal one on coder/websocket.
//
// go-nostr v0.52.3's client has data races of its own on every disconnect
// (Relay.close reads Connection while its writer goroutine clears it; the
// reader writes ConnectionError while the writer reads it), so under the
// race detector the tests use rawClient and the relay is still race-checked;
// without it they use go-nostr's client. CI runs both (see .ci/run).
type client interface {
	// Subscribe sends a REQ.
	Subscribe(filters nostr.Filters) *clientSub
	// Auth answers the connection's last challenge, signing for the relay
	// URL the client dialed.
	Auth(k key) error
	// Publish sends an EVENT and returns the refusal reason, "" if accepted.
	Publish(ev nostr.Event) string
	Close()
}

// clientSub is one subscription's replies.
type clientSub struct {
	Events <-chan *nostr.Event
	EOSE   <-chan struct{}
	Closed <-chan string
	unsub  func()
}

// dial connects the client this build uses.
func dial(t testing.TB, url string) client {
	t.Helper()
	var c client
	if raceEnabled {
		c = dialRaw(t, url)
	} else {
		c = dialGoNostr(t, url)
	}
	t.Cleanup(c.Close)
	return c
}

// goNostrClient adapts go-nostr's client.
type goNostrClient struct {
	t  testing.TB
	rl *nostr.Relay
}

func dialGoNostr(t testing.TB, url string) client {
	rl, err := nostr.RelayConnect(ctxTimeout(t, 5*time.Second), url)
	if err != nil {
		t.Fatal(err)
	}
	return &goNostrClient{t: t, rl: rl}
}

func (c *goNostrClient) Subscribe(filters nostr.Filters) *clientSub {
	sub, err := c.rl.Subscribe(context.Background(), filters)
	if err != nil {
		c.t.Fatal(err)
	}
	return &clientSub{Events: sub.Events, EOSE: sub.EndOfStoredEvents, Closed: sub.ClosedReason, unsub: sub.Unsub}
}

func (c *goNostrClient) Auth(k key) error {
	return c.rl.Auth(ctxTimeout(c.t, 5*time.Second), func(ev *nostr.Event) error { return ev.Sign(k.sk) })
}

func (c *goNostrClient) Publish(ev nostr.Event) string {
	err := c.rl.Publish(ctxTimeout(c.t, 20*time.Second), ev)
	if err == nil {
		return ""
	}
	return strings.TrimPrefix(err.Error(), "msg: ")
}

func (c *goNostrClient) Close() { c.rl.Close() }

// rawClient speaks NIP-01 over a websocket with nothing else: it sends what
// it is told and sorts what comes back by subscription and event id.
type rawClient struct {
	t    testing.TB
	url  string
	ws   *websocket.Conn
	done chan struct{}

	mu        sync.Mutex
	challenge string
	oks       map[string]chan string
	subs      map[string]*rawSub
	seq       int
}

type rawSub struct {
	events chan *nostr.Event
	eose   chan struct{}
	closed chan string
}

func dialRaw(t testing.TB, url string) client {
	ws, _, err := websocket.Dial(ctxTimeout(t, 5*time.Second), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	c := &rawClient{t: t, url: url, ws: ws, done: make(chan struct{}), oks: map[string]chan string{}, subs: map[string]*rawSub{}}
	go c.read()
	return c
}

func (c *rawClient) read() {
	defer close(c.done)
	for {
		_, data, err := c.ws.Read(context.Background())
		if err != nil {
			c.mu.Lock()
			for _, s := range c.subs {
				select {
				case s.closed <- "connection closed":
				default:
				}
			}
			c.mu.Unlock()
			return
		}
		var msg []json.RawMessage
		if json.Unmarshal(data, &msg) != nil || len(msg) < 2 {
			continue
		}
		var label, first string
		json.Unmarshal(msg[0], &label)
		json.Unmarshal(msg[1], &first)
		c.mu.Lock()
		switch label {
		case "AUTH":
			c.challenge = first
		case "OK":
			var reason string
			if len(msg) > 3 {
				json.Unmarshal(msg[3], &reason)
			}
			if ch, ok := c.oks[first]; ok {
				ch <- reason
				delete(c.oks, first)
			}
		case "EVENT":
			var ev nostr.Event
			if s, ok := c.subs[first]; ok && len(msg) > 2 && json.Unmarshal(msg[2], &ev) == nil {
				s.events <- &ev
			}
		case "EOSE":
			if s, ok := c.subs[first]; ok {
				close(s.eose)
				s.eose = make(chan struct{}) // a replaced subscription may end again
			}
		case "CLOSED":
			var reason string
			if len(msg) > 2 {
				json.Unmarshal(msg[2], &reason)
			}
			if s, ok := c.subs[first]; ok {
				s.closed <- reason
			}
		}
		c.mu.Unlock()
	}
}

func (c *rawClient) send(v any) {
	b, _ := json.Marshal(v)
	if err := c.ws.Write(ctxTimeout(c.t, 5*time.Second), websocket.MessageText, b); err != nil {
		c.t.Errorf("send: %v", err)
	}
}

func (c *rawClient) Subscribe(filters nostr.Filters) *clientSub {
	c.mu.Lock()
	c.seq++
	id := "sub" + string(rune('a'+c.seq%26)) + strings.Repeat("x", c.seq/26)
	s := &rawSub{events: make(chan *nostr.Event, 1024), eose: make(chan struct{}), closed: make(chan string, 4)}
	c.subs[id] = s
	eose := s.eose
	c.mu.Unlock()
	c.send(append([]any{"REQ", id}, anySlice(filters)...))
	return &clientSub{Events: s.events, EOSE: eose, Closed: s.closed, unsub: func() {
		c.mu.Lock()
		delete(c.subs, id)
		c.mu.Unlock()
		c.send([]any{"CLOSE", id})
	}}
}

func anySlice(fs nostr.Filters) []any {
	out := make([]any, len(fs))
	for i, f := range fs {
		out[i] = f
	}
	return out
}

// publish sends an envelope carrying ev and waits for its OK.
func (c *rawClient) publish(label string, ev nostr.Event) (accepted bool, reason string) {
	ch := make(chan string, 1)
	c.mu.Lock()
	c.oks[ev.ID] = ch
	c.mu.Unlock()
	c.send([]any{label, ev})
	select {
	case reason := <-ch:
		return reason == "" || strings.HasPrefix(reason, PrefixDuplicate), reason
	case <-time.After(5 * time.Second):
		return false, "no OK within 5s"
	}
}

func (c *rawClient) Auth(k key) error {
	c.mu.Lock()
	challenge := c.challenge
	c.mu.Unlock()
	ev := nostr.Event{Kind: nostr.KindClientAuthentication, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"relay", c.url}, {"challenge", challenge}}}
	if err := ev.Sign(k.sk); err != nil {
		return err
	}
	if ok, reason := c.publish("AUTH", ev); !ok {
		return errors.New("msg: " + reason)
	}
	return nil
}

func (c *rawClient) Publish(ev nostr.Event) string {
	ok, reason := c.publish("EVENT", ev)
	if ok {
		return ""
	}
	return reason
}

func (c *rawClient) Close() {
	c.ws.CloseNow()
	<-c.done
}
