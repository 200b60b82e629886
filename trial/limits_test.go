package trial

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestStorageLimitHoldsOrIsWarned: an agent writes 100 MB into the working
// folder of a task with storage_mb = 64. Either the limit holds (less than
// 64 MB reached the folder), or the trial said before the agents started
// that it cannot hold it: a warning event before agent_setup, and
// storage_mb in result.json's limits_not_enforced. Before, it was silently
// ignored.
func TestStorageLimitHoldsOrIsWarned(t *testing.T) {
	env := testEnv(t)
	tm := team(t, "testdata/manifests/attack-storage.yaml")
	dir := filepath.Join(t.TempDir(), "trial")
	var events []Event
	res, err := Run(t.Context(), env, Spec{Name: "t__storage__1", Dir: dir, Team: tm, Task: loadTask(t, "testdata/tasks/storage"), Attempt: 1},
		func(e Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, dir)
		}
	})
	out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
	m := regexp.MustCompile(`wrote (\d+) bytes`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("outcome %s (%+v): the verifier did not say what was written:\n%s", res.Outcome, res.ExceptionInfo, out)
	}
	written, _ := strconv.ParseInt(string(m[1]), 10, 64)
	if written < 64<<20 {
		t.Logf("the limit held: %d bytes reached the folder", written)
		return
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "result.json"))
	var rec struct {
		NotEnforced []string `json:"limits_not_enforced"`
		Note        string   `json:"limits_note"`
	}
	json.Unmarshal(raw, &rec)
	if len(rec.NotEnforced) != 1 || rec.NotEnforced[0] != "storage_mb" || !strings.Contains(rec.Note, "storage_mb = 64") {
		t.Errorf("%d bytes written past storage_mb = 64, and result.json says limits_not_enforced %q (%q)", written, rec.NotEnforced, rec.Note)
	}
	warned := -1
	for i, e := range events {
		if e.Type == "warning" && strings.Contains(e.Message, "storage_mb") {
			warned = i
			break
		}
		if e.Type == EventPhase && e.Phase == "agent_setup" {
			break
		}
	}
	if warned < 0 {
		t.Errorf("no warning about storage_mb before the agents started: %+v", events)
	}
}
