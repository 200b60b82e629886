package member

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// The inbox hands messages out in the order they came, however Push and
// Next interleave; a closed inbox drops what it held and takes nothing.
func TestInbox(t *testing.T) {
	in := NewInbox()
	const n = 500
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			in.Push(&nostr.Event{Content: strconv.Itoa(i)})
		}
	})
	for i := range n {
		ev, ok := in.Next(t.Context())
		if !ok || ev.Content != strconv.Itoa(i) {
			t.Fatalf("message %d: %v %v", i, ev, ok)
		}
	}
	wg.Wait()
	in.Push(&nostr.Event{Content: "dropped"})
	in.Close()
	in.Push(&nostr.Event{Content: "refused"})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if ev, ok := in.Next(ctx); ok {
		t.Errorf("a closed inbox gave %q", ev.Content)
	}
}
