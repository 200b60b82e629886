package termsafe

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain text stays", "exit 1: tests failed\n\tsee log", "exit 1: tests failed\n\tsee log"},
		{"non-ASCII text stays", "größe ✓ 日本語 🙂 \ufffd", "größe ✓ 日本語 🙂 \ufffd"},
		{"window title (OSC … BEL)", "\x1b]0;pwned\x07after", `\u001b]0;pwned\u0007after`},
		{"clear screen (CSI)", "\x1b[2J\x1b[H", `\u001b[2J\u001b[H`},
		{"colours", "\x1b[31mred\x1b[0m", `\u001b[31mred\u001b[0m`},
		{"carriage return overwrites the line", "passed\rfailed", `passed\u000dfailed`},
		{"backspace", "ok\b\bno", `ok\u0008\u0008no`},
		{"NUL and DEL", "a\x00b\x7fc", `a\u0000b\u007fc`},
		{"C1 CSI as UTF-8", "\u009b2J", `\u009b2J`},
		{"C1 OSC and ST", "\u009d0;t\u009c", `\u009d0;t\u009c`},
		{"bidi override", "task-\u202eexe.txt", `task-\u202eexe.txt`},
		{"bidi isolates", "\u2066a\u2069", `\u2066a\u2069`},
		{"invalid bytes", "a\xffb\xc3", `a\xffb\xc3`},
		{"a lone continuation byte", "\x9b2J", `\x9b2J`},
		{"an overlong encoding", "\xc0\xaf", `\xc0\xaf`},
		{"a surrogate", "\xed\xa0\x80", `\xed\xa0\x80`},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Escape(tc.in); got != tc.want {
				t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestWriterSplits: a write that ends inside a character or inside a
// control sequence gives what one write of the whole would.
func TestWriterSplits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"a sequence split after ESC", []string{"a\x1b", "]0;t\x07", "b"}, `a\u001b]0;t\u0007b`},
		{"an emoji split in three", []string{"x\xf0\x9f", "\x99", "\x82y"}, "x🙂y"},
		{"C1 CSI split in its middle", []string{"\xc2", "\x9b2J"}, `\u009b2J`},
		{"a bidi override split", []string{"\xe2\x80", "\xae"}, `\u202e`},
		{"a character that never ends", []string{"ok \xe2\x82"}, `ok \xe2\x82`},
		{"a character broken by the next write", []string{"\xe2\x82", "A"}, `\xe2\x82A`},
		{"one byte at a time", strings.Split("é\x1b[2Jé", ""), `é\u001b[2Jé`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			w := NewWriter(&out)
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("wrote %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// TestWriterHoldsNothingItNeedNot: whole lines pass at once, so live
// output does not lag behind.
func TestWriterHoldsNothingItNeedNot(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	for _, s := range []string{"line é\n", "\x1b[2J", "日本"} {
		before := out.Len()
		w.Write([]byte(s))
		if out.Len() == before {
			t.Errorf("%q was held back", s)
		}
	}
}

// TestProgressWriterKeepsCarriageReturns: git's progress redraws its
// line; a server's control sequences in it are escaped all the same.
func TestProgressWriterKeepsCarriageReturns(t *testing.T) {
	var out bytes.Buffer
	w := NewProgressWriter(&out)
	w.Write([]byte("Counting objects: 50%\rCounting objects: 100%\nremote: \x1b]0;pwned\x07\x1b[2J\b\n"))
	w.Flush()
	if want := "Counting objects: 50%\rCounting objects: 100%\nremote: \\u001b]0;pwned\\u0007\\u001b[2J\\u0008\n"; out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterReportsItsWriterFailing(t *testing.T) {
	w := NewWriter(failingWriter{})
	if n, err := w.Write([]byte("a\x1bb")); err == nil || n != 0 {
		t.Errorf("Write = %d, %v", n, err)
	}
}

// safe is what every escaped text must be: UTF-8 with no control
// character but newline and tab, and no bidirectional control.
func safe(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			return false
		}
	}
	return true
}

func FuzzEscape(f *testing.F) {
	f.Add([]byte("\x1b]0;title\x07\x1b[2J"), uint8(1), uint8(2))
	f.Add([]byte("é🙂\u009b\u202e\xff\xe2\x82"), uint8(1), uint8(3))
	f.Add([]byte("plain\n\ttext"), uint8(4), uint8(4))
	f.Fuzz(func(t *testing.T, in []byte, a, b uint8) {
		s := string(in)
		got := Escape(s)
		if !safe(got) {
			t.Fatalf("Escape(%q) = %q holds what a terminal obeys", s, got)
		}
		if safe(s) && got != s {
			t.Fatalf("Escape(%q) = %q changed safe text", s, got)
		}
		if again := Escape(got); again != got {
			t.Fatalf("Escape is not stable: %q, then %q", got, again)
		}
		var out bytes.Buffer
		w := NewWriter(&out)
		step := []int{int(a)%7 + 1, int(b)%11 + 1}
		for i, k := 0, 0; i < len(in); k++ {
			n := min(step[k%2], len(in)-i)
			w.Write(in[i : i+n])
			i += n
		}
		w.Flush()
		if out.String() != got {
			t.Fatalf("streamed %q, whole %q", out.String(), got)
		}
		out.Reset()
		pw := NewProgressWriter(&out)
		pw.Write(in)
		pw.Flush()
		if p := out.String(); !safe(strings.ReplaceAll(p, "\r", "")) || strings.Count(p, "\r") != strings.Count(s, "\r") {
			t.Fatalf("the progress writer wrote %q for %q", p, s)
		}
	})
}
