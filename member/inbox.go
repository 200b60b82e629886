package member

import (
	"context"
	"sync"

	"github.com/nbd-wtf/go-nostr"
)

// Inbox queues the messages that mention a member, in order, for the one
// loop that takes a turn per message: the reference agent's, and each
// bridge's. Push never blocks (it runs on the connection's reader); Close
// drops what is queued and takes nothing more (an agent gone idle).
type Inbox struct {
	mu     sync.Mutex
	queue  []*nostr.Event
	closed bool
	wake   chan struct{}
}

// NewInbox makes an empty inbox.
func NewInbox() *Inbox { return &Inbox{wake: make(chan struct{}, 1)} }

// Push queues ev, unless the inbox is closed.
func (in *Inbox) Push(ev *nostr.Event) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return
	}
	in.queue = append(in.queue, ev)
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// Next waits for the oldest queued message and takes it; false when ctx
// ends first. A closed inbox waits for ctx.
func (in *Inbox) Next(ctx context.Context) (*nostr.Event, bool) {
	for {
		in.mu.Lock()
		if len(in.queue) > 0 && !in.closed {
			ev := in.queue[0]
			in.queue = in.queue[1:]
			in.mu.Unlock()
			return ev, true
		}
		in.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-in.wake:
		}
	}
}

// Close drops the queued messages and refuses later ones.
func (in *Inbox) Close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	in.queue = nil
}
