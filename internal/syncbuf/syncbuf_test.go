package syncbuf

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWrites: writes from many goroutines are each kept whole,
// and what is read is a copy.
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("0123456789\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for i, l := range lines {
		if l != "0123456789" {
			t.Fatalf("line %d is %q: writes interleaved", i, l)
		}
	}
	got := b.Bytes()
	got[0] = 'x'
	if !bytes.HasPrefix(b.Bytes(), []byte("0")) {
		t.Error("Bytes gave the buffer itself, not a copy")
	}
}
