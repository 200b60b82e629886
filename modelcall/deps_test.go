package modelcall

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// troupeDeps lists the packages of troupe's that the packages named import,
// themselves included, by their path in the module.
func troupeDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ours []string
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, "github.com/troupebench/troupe/"); ok {
			ours = append(ours, rel)
		}
	}
	return ours
}

// TestReadersNeedNoGateway: what reads a trial's model calls (the viewer
// and the comparisons in report, the ATIF export) imports the calls as
// data, never the gateway that made them; and the data imports nothing of
// troupe's but its internal helpers.
func TestReadersNeedNoGateway(t *testing.T) {
	readers := troupeDeps(t, "../report", "../atif")
	if !slices.Contains(readers, "modelcall") || !slices.Contains(readers, "report") {
		t.Fatalf("go list named %v: not the readers' imports", readers)
	}
	if slices.Contains(readers, "llm") {
		t.Errorf("report or atif imports the gateway, llm (their imports: %v): read model calls through modelcall", readers)
	}
	for _, p := range troupeDeps(t, ".") {
		if p != "modelcall" && !strings.HasPrefix(p, "internal/") {
			t.Errorf("modelcall imports %s: it is data at the bottom of the import graph", p)
		}
	}
}
