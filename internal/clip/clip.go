// Package clip shortens text for messages, logs and pages without cutting a
// character in half: troupe quotes what agents, verifiers and upstreams
// said, and any of it may be UTF-8 of any kind.
package clip

import "unicode/utf8"

// Ellipsis marks where text was cut.
const Ellipsis = "…"

// Head returns the first n characters of s, with an ellipsis if s was
// longer.
func Head(s string, n int) string {
	if n < 0 {
		n = 0
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i] + Ellipsis
}

// Tail returns the last n characters of s, with an ellipsis before them if
// s was longer.
func Tail(s string, n int) string {
	if n < 0 {
		n = 0
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := len(s)
	for range n {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return Ellipsis + s[i:]
}
