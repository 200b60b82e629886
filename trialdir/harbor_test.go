package trialdir

import (
	"strings"
	"testing"
)

func TestNewUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewUUID()
		// Version 4, variant 10xx (RFC 9562).
		if !IsUUID(id) || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) || seen[id] {
			t.Fatalf("%q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "jobs-1760000000", "0A1B2C3D-0000-4000-8000-000000000000", "0a1b2c3d00004000800000000000000000"} {
		if IsUUID(bad) {
			t.Errorf("%q is taken for a UUID", bad)
		}
	}
}
