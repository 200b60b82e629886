package contract

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestTheInContainerSideIsHostFree: the programs that run inside a trial
// container (the reference agent, the ACP bridge) import none of troupe's
// host side (runtime, stack definitions, the trial, the relay, the
// gateway, the loaders): only the contract, the channel's conventions and
// the members' client, and what those import.
func TestTheInContainerSideIsHostFree(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../agent", "../acpbridge", "../oneshot").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := []string{"agent", "acpbridge", "oneshot", "teamtools", "member", "channel", "contract", "internal/clip", "internal/childlog"}
	var ours []string
	for _, p := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(p, "github.com/troupebench/troupe/")
		if !ok {
			continue
		}
		ours = append(ours, rel)
		if !slices.Contains(allowed, rel) {
			t.Errorf("the in-container side imports %s, a host-side package", rel)
		}
	}
	if !slices.Contains(ours, "contract") || !slices.Contains(ours, "member") {
		t.Fatalf("go list named %v: not the agent's imports", ours)
	}
}
