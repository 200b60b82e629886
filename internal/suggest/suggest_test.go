package suggest

import "testing"

func TestClosest(t *testing.T) {
	keys := []string{"condition", "roster", "prices", "timeout_sec", "network_mode"}
	for name, want := range map[string]string{
		"conditon":     "condition",
		"rooster":      "roster",
		"timeout_secs": "timeout_sec",
		"networkmode":  "network_mode",
		"zzz":          "",
		"":             "",
		"p":            "",
	} {
		if got := Closest(name, keys); got != want {
			t.Errorf("Closest(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"same", "same", 0}} {
		if got := Distance(c.a, c.b); got != c.want || Distance(c.b, c.a) != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
