package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const value = "sk-live-0123456789abcdef"

func TestSecretNeverPrints(t *testing.T) {
	s := New(value)
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "key", s, "group", slog.GroupValue(slog.Any("inner", s)))
	js, _ := json.Marshal(map[string]any{"k": s, "p": &s})
	shown := []string{
		fmt.Sprint(s), fmt.Sprintf("%s %v %+v %#v %q %x %X %d", s, s, s, s, s, s, s, s),
		fmt.Sprintf("%v", struct{ K Secret }{s}), fmt.Sprintf("%+v", []Secret{s}),
		logged.String(), string(js),
	}
	for _, out := range shown {
		if strings.Contains(out, value) || strings.Contains(out, fmt.Sprintf("%x", value)) {
			t.Errorf("the value shows in %q", out)
		}
		if !strings.Contains(out, Redacted) {
			t.Errorf("%q does not say it redacted", out)
		}
	}
	if s.Reveal() != value || s.IsZero() || !(Secret{}).IsZero() {
		t.Error("Reveal or IsZero is wrong")
	}
}

func TestScrub(t *testing.T) {
	sc := NewScrubber(New(value), New("tg-abcdefabcdef"), New("short"), New(""))
	for _, c := range []struct{ in, want string }{
		{"nothing here", "nothing here"},
		{"key=" + value + "\n", "key=" + Redacted + "\n"},
		{value + value, Redacted + Redacted},
		{"tg-abcdefabcdef and " + value, Redacted + " and " + Redacted},
		{"short is not looked for", "short is not looked for"},
	} {
		if got := string(sc.Scrub([]byte(c.in))); got != c.want {
			t.Errorf("Scrub(%q) = %q, want %q", c.in, got, c.want)
		}
		if sc.Contains([]byte(c.in)) != (c.in != c.want) {
			t.Errorf("Contains(%q) is wrong", c.in)
		}
	}
	var nilScrubber *Scrubber
	if got := nilScrubber.Scrub([]byte(value)); string(got) != value || !nilScrubber.Empty() {
		t.Error("a nil scrubber changed its input")
	}
}

// TestWriterSplits writes a stream in every split of two chunks: the
// secret is found wherever the cut falls.
func TestWriterSplits(t *testing.T) {
	sc := NewScrubber(New(value))
	in := "before " + value + " after\n" + value
	want := string(sc.Scrub([]byte(in)))
	for cut := 0; cut <= len(in); cut++ {
		var out bytes.Buffer
		w := sc.Writer(&out)
		for _, part := range []string{in[:cut], in[cut:]} {
			if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
				t.Fatalf("write: %d %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want || w.Replaced() != 2 {
			t.Errorf("cut at %d: %q (%d replaced), want %q (2)", cut, out.String(), w.Replaced(), want)
		}
	}
}

// TestWriterDoesNotLag: a line that ends in a newline is written at once.
func TestWriterDoesNotLag(t *testing.T) {
	var out bytes.Buffer
	w := NewScrubber(New(value)).Writer(&out)
	w.Write([]byte("progress: 50%\n"))
	if out.String() != "progress: 50%\n" {
		t.Errorf("a finished line was held back: %q", out.String())
	}
	w.Write([]byte("abc"))
	if out.String() != "progress: 50%\n" {
		t.Errorf("bytes that could start the secret were written: %q", out.String())
	}
	w.Flush()
	if out.String() != "progress: 50%\nabc" {
		t.Errorf("Flush: %q", out.String())
	}
}

// FuzzWriter: however a stream is cut into writes, what comes out is the
// whole input scrubbed at once, and holds no secret.
func FuzzWriter(f *testing.F) {
	f.Add([]byte("x "+value+" y"), uint8(3), uint8(7))
	f.Add([]byte(value[:10]+value), uint8(10), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, a, b uint8) {
		sc := NewScrubber(New(value), New("tg-0011223344"))
		var out bytes.Buffer
		w := sc.Writer(&out)
		step := []int{int(a)%17 + 1, int(b)%23 + 1}
		for i, k := 0, 0; i < len(in); k++ {
			n := min(step[k%2], len(in)-i)
			w.Write(in[i : i+n])
			i += n
		}
		w.Flush()
		want := sc.Scrub(bytes.Clone(in))
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("streamed %q, whole %q", out.Bytes(), want)
		}
		if sc.Contains(out.Bytes()) && !sc.Contains([]byte(Redacted)) {
			t.Fatalf("a secret passed: %q", out.Bytes())
		}
	})
}
