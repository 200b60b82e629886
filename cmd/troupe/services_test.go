package main

import (
	"strings"
	"testing"
)

// TestServicesPolicyRefused: a --services (or TROUPE_SERVICES) that is not
// a policy stops the run before anything starts, saying which values are.
func TestServicesPolicyRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--services", "forever"}, ""},
		{"environment", nil, "forever"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("TROUPE_SERVICES", tc.env)
			}
			args := append([]string{"run", "../../examples/manifests/solo.yaml", "--tasks", "../../examples/tasks/hello-world", "--dry-run"}, tc.args...)
			code, _, errOut := troupe(t, args...)
			if code != exitUsage || !strings.Contains(errOut, `services policy "forever" is not "auto"`) {
				t.Errorf("exit %d: %s", code, errOut)
			}
		})
	}
}
