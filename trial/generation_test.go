package trial

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial/outcome"
)

// TestThinkingEffortReachesTheModel: two conditions that differ only in
// thinking_effort send different requests: each call's record says what
// it asked, and the hashes differ. The agent calls the model once more
// after its DONE; the sweep may cut that call before its request arrived
// whole, and such a call cannot say what it asked.
func TestThinkingEffortReachesTheModel(t *testing.T) {
	env := testEnv(t)
	asked := map[string]*modelcall.Asked{}
	hashes := map[string]bool{}
	for _, effort := range []string{"low", "high"} {
		res, dir := runTrial(t, env, "testdata/manifests/effort-"+effort+".yaml", helloWorld)
		if res.Outcome != outcome.Passed {
			t.Fatalf("%s: %s %+v", effort, res.Outcome, res.ExceptionInfo)
		}
		hashes[res.ManifestHash] = true
		f, err := os.Open(filepath.Join(dir, "agents", "solo-1", "llm-calls.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		calls := 0
		for sc.Scan() {
			var r modelcall.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			if !r.RequestArrived() {
				continue
			}
			calls++
			if r.Asked == nil || asked[effort] != nil && *r.Asked != *asked[effort] {
				t.Errorf("%s: call %d asked %+v", effort, calls, r.Asked)
			}
			asked[effort] = r.Asked
		}
		f.Close()
		if calls == 0 {
			t.Fatalf("%s: no call recorded", effort)
		}
	}
	if len(hashes) != 2 {
		t.Error("the two conditions hash alike")
	}
	if asked["low"] == nil || asked["high"] == nil || asked["low"].ReasoningEffort != "low" || asked["high"].ReasoningEffort != "high" || asked["high"].MaxOutputTokens != 4000 {
		t.Errorf("asked: low %+v, high %+v", asked["low"], asked["high"])
	}
}
