package clip

import (
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in         string
		n          int
		head, tail string
	}{
		{"hello", 10, "hello", "hello"},
		{"hello", 5, "hello", "hello"},
		{"hello", 3, "hel…", "…llo"},
		{"héllo wörld", 2, "hé…", "…ld"},
		{"日本語テキスト", 3, "日本語…", "…キスト"},
		{"🙂🙂🙂", 1, "🙂…", "…🙂"},
		{"abc", 0, "…", "…"},
		{"", 3, "", ""},
	} {
		if got := Head(c.in, c.n); got != c.head {
			t.Errorf("Head(%q, %d) = %q, want %q", c.in, c.n, got, c.head)
		}
		if got := Tail(c.in, c.n); got != c.tail {
			t.Errorf("Tail(%q, %d) = %q, want %q", c.in, c.n, got, c.tail)
		}
	}
}

func FuzzClip(f *testing.F) {
	f.Add("héllo", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 64
		for _, out := range []string{Head(s, n), Tail(s, n)} {
			if utf8.ValidString(s) && !utf8.ValidString(out) {
				t.Fatalf("clipping valid %q made invalid %q", s, out)
			}
		}
	})
}
