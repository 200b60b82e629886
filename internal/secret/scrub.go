package secret

import (
	"bytes"
	"io"
	"sync"
)

// minLen is the shortest value a Scrubber looks for: anything shorter would
// match ordinary text.
const minLen = 8

// Scrubber finds and replaces known secrets. It is safe for concurrent use
// and immutable once made.
type Scrubber struct {
	forms  [][]byte
	maxLen int
	// alphabet marks every byte that occurs in some secret: a secret that
	// crosses the end of a write lies in a trailing run of such bytes.
	alphabet [256]bool
}

// NewScrubber looks for each given secret, exactly as it is. Values shorter
// than 8 bytes are ignored (they would match ordinary text); give every form
// a secret is shown in (hex in both cases, bech32, …) as a secret of its own.
func NewScrubber(secrets ...Secret) *Scrubber {
	s := &Scrubber{}
	seen := map[string]bool{}
	for _, sec := range secrets {
		v := sec.v
		if len(v) < minLen || seen[v] {
			continue
		}
		seen[v] = true
		s.forms = append(s.forms, []byte(v))
		s.maxLen = max(s.maxLen, len(v))
		for i := 0; i < len(v); i++ {
			s.alphabet[v[i]] = true
		}
	}
	return s
}

// Empty reports whether the scrubber looks for nothing.
func (s *Scrubber) Empty() bool { return s == nil || len(s.forms) == 0 }

// Contains reports whether b holds any of the secrets.
func (s *Scrubber) Contains(b []byte) bool {
	if s.Empty() {
		return false
	}
	for _, f := range s.forms {
		if bytes.Contains(b, f) {
			return true
		}
	}
	return false
}

// Scrub returns b with every secret replaced by Redacted. It returns b
// itself when there is nothing to replace, a new slice otherwise.
func (s *Scrubber) Scrub(b []byte) []byte {
	out, _ := s.scrub(b)
	return out
}

// scrub is Scrub that also counts the replacements.
func (s *Scrubber) scrub(b []byte) ([]byte, int) {
	if s.Empty() {
		return b, 0
	}
	n := 0
	for _, f := range s.forms {
		if k := bytes.Count(b, f); k > 0 {
			n += k
			b = bytes.ReplaceAll(b, f, []byte(Redacted))
		}
	}
	return b, n
}

// hold is how many bytes at the end of b could start a secret that the next
// write completes: the trailing run of bytes that occur in secrets, at most
// one short of the longest secret.
func (s *Scrubber) hold(b []byte) int {
	n := 0
	for n < len(b) && n < s.maxLen-1 && s.alphabet[b[len(b)-1-n]] {
		n++
	}
	return n
}

// Writer scrubs a stream on its way to w. A secret split across writes is
// still found: the few bytes at the end of a write that could start one are
// held back until the next write shows they do not, or until Flush. Output
// that ends with a newline or a space is passed on whole, so live logs do not
// lag.
type Writer struct {
	s        *Scrubber
	w        io.Writer
	mu       sync.Mutex
	held     []byte
	replaced int
}

// Writer returns a scrubbing writer to w.
func (s *Scrubber) Writer(w io.Writer) *Writer { return &Writer{s: s, w: w} }

// Write scrubs p (with what an earlier write held back) and passes it on.
// It reports all of p written unless w fails.
func (w *Writer) Write(p []byte) (int, error) {
	if w.s.Empty() {
		return w.w.Write(p)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := p
	if len(w.held) > 0 {
		buf = append(w.held, p...)
	}
	buf, n := w.s.scrub(buf)
	w.replaced += n
	keep := w.s.hold(buf)
	out := buf[:len(buf)-keep]
	// held must not alias p, which the caller may reuse.
	w.held = append(w.held[:0:0], buf[len(buf)-keep:]...)
	if len(out) > 0 {
		if _, err := w.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what is held back: at the end of the stream it cannot be the
// start of a secret any more.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	_, err := w.w.Write(w.held)
	w.held = nil
	return err
}

// Replaced is how many secrets the writer has replaced so far.
func (w *Writer) Replaced() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.replaced
}
