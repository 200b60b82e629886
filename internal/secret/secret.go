// Package secret keeps troupe's secrets — the real API keys of the host, and
// the keys and tokens minted for each trial — out of everything troupe
// prints, logs and writes. A Secret redacts itself in every printed form
// (fmt, slog, JSON, text), so "never logged" is a property of the type, not
// a promise of each caller; a Scrubber removes known secrets from bytes and
// from streams that untrusted code fills (an agent's output, a verifier's).
package secret

import (
	"fmt"
	"log/slog"
)

// Redacted is what a secret is replaced with wherever it would be shown.
const Redacted = "[redacted by troupe]"

// Secret holds a value that must never be shown. Its zero value is empty.
type Secret struct{ v string }

// New wraps a value.
func New(v string) Secret { return Secret{v: v} }

// Reveal returns the value, for the one place that must use it: the file
// that hands it to its agent, the header that carries it upstream.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.v == "" }

// String redacts: %s, %v and %q never show the value.
func (s Secret) String() string { return Redacted }

// GoString redacts %#v too.
func (s Secret) GoString() string { return "secret.Secret(" + Redacted + ")" }

// Format redacts every verb, %x and %d included.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprint(f, s.GoString())
		return
	}
	fmt.Fprint(f, Redacted)
}

// LogValue redacts in slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalText redacts in JSON, YAML and any other text encoding.
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }
