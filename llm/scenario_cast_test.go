package llm

import (
	"fmt"
	"strings"
	"testing"
)

// TestCast: a hand-run gateway's team plays every script of a scenario,
// one agent each, in the file's order, the first the orchestrator; and
// each agent is one the scenario gives that script to.
func TestCast(t *testing.T) {
	for _, tc := range []struct{ keys, want string }{
		{"lead implementer", "lead-1:lead:orchestrator implementer-1:implementer:worker"},
		{"implementer lead", "implementer-1:implementer:orchestrator lead-1:lead:worker"},
		{"'*'", "other-1:other:orchestrator"},
		{"lead implementer worker-2 lead-1 other '*'",
			"lead-2:lead:orchestrator implementer-1:implementer:worker worker-2:worker:worker lead-1:lead:worker other-1:other:worker other2-1:other2:worker"},
	} {
		var doc strings.Builder
		doc.WriteString("scripts:\n")
		for key := range strings.FieldsSeq(tc.keys) {
			fmt.Fprintf(&doc, "  %s: [{reply: x}]\n", key)
		}
		sc, err := LoadScenario("cast.yaml", []byte(doc.String()))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, a := range sc.Cast("mock/cast") {
			got = append(got, a.ID+":"+a.Role+":"+a.Kind)
			if want := strings.Trim(strings.Fields(tc.keys)[i], "'"); sc.ScriptOf(a.ID, a.Role) != want || a.Endpoint != "mock/cast" {
				t.Errorf("%s: %+v plays %q, not %q", tc.keys, a, sc.ScriptOf(a.ID, a.Role), want)
			}
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: cast %s\nwant %s", tc.keys, strings.Join(got, " "), tc.want)
		}
	}
}
