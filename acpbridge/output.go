package acpbridge

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/troupebench/troupe/internal/clip"
)

// stderrLines logs the child's standard error, one JSON line per line it
// writes, and keeps the last ones for the message that reports its end.
type stderrLines struct {
	log *slog.Logger

	mu      sync.Mutex
	partial []byte
	last    []string
}

// stderrKept is how many of the child's last stderr lines are quoted.
const stderrKept = 20

func (s *stderrLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(string(s.partial[:i]))
		s.partial = s.partial[i+1:]
	}
	if len(s.partial) > 64<<10 { // a line without end: log what there is
		s.line(string(s.partial))
		s.partial = s.partial[:0]
	}
	return len(p), nil
}

// line runs under mu.
func (s *stderrLines) line(l string) {
	l = strings.TrimRight(l, "\r")
	if strings.TrimSpace(l) == "" {
		return
	}
	l = clip.Head(l, 2000)
	s.log.Info("child stderr", "line", l)
	s.last = append(s.last, l)
	if len(s.last) > stderrKept {
		s.last = s.last[len(s.last)-stderrKept:]
	}
}

// Last is the child's last stderr lines, the unfinished one included.
func (s *stderrLines) Last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := s.last
	if len(bytes.TrimSpace(s.partial)) > 0 {
		lines = append(lines[:len(lines):len(lines)], clip.Head(string(s.partial), 2000))
	}
	return strings.Join(lines, "\n")
}

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
