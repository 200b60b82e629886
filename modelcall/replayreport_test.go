package modelcall

import (
	"strings"
	"testing"
)

func TestParseDivergencePolicy(t *testing.T) {
	for _, s := range []string{"stop", "live", "mock-error"} {
		if p, err := ParseDivergencePolicy(s); err != nil || string(p) != s {
			t.Errorf("%s: %v", s, err)
		}
	}
	if _, err := ParseDivergencePolicy("retry"); err == nil || !strings.Contains(err.Error(), "give stop") {
		t.Errorf("%v", err)
	}
}
