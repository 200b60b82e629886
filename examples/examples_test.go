package examples

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/troupebench/troupe/llm"
)

// Every example manifest names a mock/<scenario> endpoint; every such
// scenario must be built in and load cleanly.
func TestScenariosLoad(t *testing.T) {
	names, err := fs.Glob(Scenarios(), "*.yaml")
	if err != nil || len(names) < 3 {
		t.Fatalf("built-in scenarios: %v %v", names, err)
	}
	for _, name := range names {
		data, err := fs.ReadFile(Scenarios(), name)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := llm.LoadScenario(name, data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if sc.Description == "" || !strings.HasPrefix(name, "hello-") {
			t.Errorf("%s: no description", name)
		}
	}
}
