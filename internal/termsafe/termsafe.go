// Package termsafe shows text that troupe did not write (what install
// scripts, verifiers and agents printed, task and file names from datasets,
// error messages that quote them) on a terminal as text. A terminal obeys
// the control characters in what it is given: an install script's
// ESC ] 0 ; … BEL retitles the window, ESC [ 2 J clears the screen, and a
// crafted sequence can hide or rewrite the lines troupe printed above it.
// Escape and Writer replace every such character with a visible escape, so
// the reader sees what was sent instead of its effect. The records on disk
// keep the bytes as they came; only what is shown is escaped.
//
// What is escaped: the C0 controls but newline and tab (carriage return and
// backspace included: they overwrite what is on the line), DEL, the C1
// controls U+0080–U+009F (some terminals read U+009B as CSI), the Unicode
// bidirectional controls (U+202E and the like reorder what is shown), and
// bytes that are not UTF-8. A control character becomes a JSON-style
// \u001b, an invalid byte \xff. The \u form keeps a JSON line that passes
// through valid JSON with the same values: encoding/json writes C0 as \u
// escapes itself but DEL, C1 and bidi controls as they are. Backslashes are
// not doubled: the escaped text is for reading, not for turning back.
package termsafe

import (
	"io"
	"sync"
	"unicode"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// unsafe reports whether r must be escaped (keepCR: but carriage
// return). r is a rune that decoded (utf8.RuneError here is an invalid
// byte, handled by the caller).
func unsafe(r rune, keepCR bool) bool {
	switch {
	case r == '\n' || r == '\t' || r == '\r' && keepCR:
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x80:
		return false
	case r <= 0x9f:
		return true
	}
	return unicode.Is(unicode.Bidi_Control, r)
}

// clean returns the length of the longest prefix of b that needs no
// escaping.
func clean(b []byte, keepCR bool) int {
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) && (c != '\r' || !keepCR) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && size == 1) || unsafe(r, keepCR) {
			return i
		}
		i += size
	}
	return len(b)
}

// appendEscaped appends b to dst with every unsafe character escaped.
func appendEscaped(dst, b []byte, keepCR bool) []byte {
	for len(b) > 0 {
		n := clean(b, keepCR)
		dst = append(dst, b[:n]...)
		if b = b[n:]; len(b) == 0 {
			break
		}
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, '\\', 'x', hexDigits[b[0]>>4], hexDigits[b[0]&0xf])
		} else {
			dst = append(dst, '\\', 'u')
			for shift := 12; shift >= 0; shift -= 4 {
				dst = append(dst, hexDigits[(r>>shift)&0xf])
			}
		}
		b = b[size:]
	}
	return dst
}

// Escape returns s with every control character, bidirectional control and
// invalid byte replaced by a visible escape (\u001b, \u202e, \xff); newline
// and tab stay. Text with none of them is returned as it is.
func Escape(s string) string {
	b := []byte(s)
	if clean(b, false) == len(b) {
		return s
	}
	return string(appendEscaped(make([]byte, 0, len(s)+16), b, false))
}

// Writer escapes what is written through it, as Escape does, on its way to
// the writer it wraps. A UTF-8 character split between two writes is
// escaped (or kept) as a whole: its first bytes are held until the next
// write or Flush. A control sequence split between writes needs nothing
// held: each of its control characters is escaped on its own, and the rest
// is printable. It is safe for concurrent use.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	keepCR bool
	held   []byte
	buf    []byte
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// NewProgressWriter returns a Writer to w that keeps carriage returns too:
// a progress display (git's, while a dataset is fetched) redraws its line
// with them. A carriage return can only overwrite the line it is on, which
// the progress owns; everything else is escaped as by NewWriter.
func NewProgressWriter(w io.Writer) *Writer { return &Writer{w: w, keepCR: true} }

// Write escapes p and passes it on. It reports all of p written unless the
// wrapped writer fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := p
	if len(w.held) > 0 {
		in = append(w.held, p...)
		w.held = nil
	}
	keep := incomplete(in)
	// held must not alias p, which the caller may reuse.
	w.held = append(w.held[:0:0], in[len(in)-keep:]...)
	in = in[:len(in)-keep]
	if len(in) == 0 {
		return len(p), nil
	}
	out := in
	if clean(in, w.keepCR) < len(in) {
		w.buf = appendEscaped(w.buf[:0], in, w.keepCR)
		out = w.buf
	}
	if _, err := w.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what a write held back: at the end of the stream the first
// bytes of a character that never came are invalid, and escaped as such.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	out := appendEscaped(nil, w.held, w.keepCR)
	w.held = nil
	_, err := w.w.Write(out)
	return err
}

// incomplete is how many bytes at the end of b start a UTF-8 character
// they do not finish: a later write may finish it.
func incomplete(b []byte) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(b); k++ {
		if tail := b[len(b)-k:]; utf8.RuneStart(tail[0]) {
			if !utf8.FullRune(tail) {
				return k
			}
			return 0
		}
	}
	return 0
}
