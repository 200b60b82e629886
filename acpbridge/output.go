package acpbridge

import (
	"sync"
	"unicode/utf8"
)

// tailBuffer keeps the last limit bytes written to it, cut at a character
// boundary, as terminal/output wants: truncated from the beginning.
type tailBuffer struct {
	limit int

	mu        sync.Mutex
	buf       []byte
	truncated bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	// Compacted only when twice over the limit: each byte is moved at
	// most once, however the output arrives.
	if len(t.buf) > 2*t.limit {
		t.buf = append(t.buf[:0], t.tail()...)
	}
	return len(p), nil
}

// tail is the last limit bytes, cut after a whole character; it runs
// under mu.
func (t *tailBuffer) tail() []byte {
	over := len(t.buf) - t.limit
	if over <= 0 {
		return t.buf
	}
	t.truncated = true
	cut := over
	for cut < len(t.buf) && !utf8.RuneStart(t.buf[cut]) {
		cut++
	}
	return t.buf[cut:]
}

// Output is what the buffer holds, and whether its start was dropped.
func (t *tailBuffer) Output() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.tail()), t.truncated
}
