package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/troupebench/troupe/trial/outcome"
)

// report counts outcomes as trial/outcome defines them, in its words: the
// job's result.json and troupe compare cannot disagree on "scored".
func TestOneDefinitionOfOutcomes(t *testing.T) {
	if !strings.HasPrefix(Policy, outcome.Policy) {
		t.Errorf("report's policy is not outcome's:\n%s\n%s", Policy, outcome.Policy)
	}
	// An outcome outside the vocabulary would be a trial in no column:
	// n_trials would not be the sum of the counts. It is not read, and
	// says why.
	dir := t.TempDir()
	path := filepath.Join(dir, "t__c__1", "result.json")
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte(`{"trial_name":"t__c__1","task_name":"t","attempt":1,"condition":"c","outcome":"errored"}`), 0o644)
	trials, err := Load(dir)
	if len(trials) != 0 || err == nil || !strings.Contains(err.Error(), `outcome "errored"`) || !strings.Contains(err.Error(), path) {
		t.Errorf("an unknown outcome: %d trials, %v", len(trials), err)
	}
}

// Two manifests under one name are told apart by the start of their hash,
// cut by characters: a hand-made hash must not become invalid UTF-8.
func TestHashSuffixIsWholeCharacters(t *testing.T) {
	c, err := Compare([]*Trial{mk("x", "aaaéééééé1", "t", 1, "passed", 1), mk("x", "aaaaaaaaa2", "t", 1, "passed", 1)}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, cd := range c.Conditions {
		if !utf8.ValidString(cd.Name) || !strings.HasPrefix(cd.Name, "x@") {
			t.Errorf("name %q", cd.Name)
		}
	}
}
