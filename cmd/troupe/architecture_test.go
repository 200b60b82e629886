package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureNamesEveryPackage: docs/architecture.md's package table
// lists every package of the module, and nothing that is not one: the
// page that explains the house cannot fall behind it.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, "github.com/troupebench/troupe/"); ok {
			pkgs = append(pkgs, rel)
		}
	}
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	table := string(doc)
	table = table[strings.Index(table, "## Packages"):strings.Index(table, "## Who owns which format")]
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(table, -1) {
		listed = append(listed, m[1])
	}
	for _, p := range pkgs {
		if !slices.Contains(listed, p) {
			t.Errorf("package %s is not in docs/architecture.md's table: say what it is for", p)
		}
	}
	for _, l := range listed {
		if !slices.Contains(pkgs, l) {
			t.Errorf("docs/architecture.md lists %s, which is no package", l)
		}
	}
	if len(pkgs) < 30 {
		t.Fatalf("go list named %d packages: %v", len(pkgs), pkgs)
	}
}
