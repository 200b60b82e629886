package trial

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial/outcome"
)

// TestConversationsRecorded: a team trial keeps each agent's model calls
// whole, compressed, one per metering line; --record meta keeps the
// metering lines only, none neither.
func TestConversationsRecorded(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "../examples/manifests/team.yaml", helloWorld)
	if res.Outcome != outcome.Passed {
		t.Fatalf("%s %+v", res.Outcome, res.ExceptionInfo)
	}
	recorded := 0
	for _, a := range res.Agents {
		agentDir := filepath.Join(dir, "agents", a.ID)
		calls, missing, err := modelcall.ReadConversation(bytes.NewReader(readPlain(t, filepath.Join(agentDir, "llm-conversation.jsonl.gz"))))
		if err != nil || missing != 0 {
			t.Fatalf("%s: %v, %d blocks missing", a.ID, err, missing)
		}
		if _, err := os.Stat(filepath.Join(agentDir, "llm-conversation.jsonl")); err == nil {
			t.Errorf("%s: the uncompressed record is left", a.ID)
		}
		metering := countAdmitted(t, filepath.Join(agentDir, "llm-calls.jsonl"))
		recorded += len(calls)
		if len(calls) != metering || int64(len(calls)) != a.Usage.Calls {
			t.Errorf("%s: %d calls recorded, %d metering lines, %d calls used", a.ID, len(calls), metering, a.Usage.Calls)
		}
		for _, c := range calls {
			if !bytes.Contains(c.Request, []byte(`"messages":[{`)) || len(c.Answer)+len(c.AnswerText) == 0 {
				t.Errorf("%s: call %d: request %.100s, answer %d bytes", a.ID, c.N, c.Request, len(c.Answer)+len(c.AnswerText))
			}
		}
	}
	if recorded == 0 {
		t.Fatal("no call recorded: the test proves nothing")
	}
	for _, mode := range []RecordMode{RecordMeta, RecordNone} {
		env.Record = mode
		_, dir := runTrial(t, env, "../examples/manifests/solo.yaml", helloWorld)
		agentDir := filepath.Join(dir, "agents", "solo-1")
		_, convErr := os.Stat(filepath.Join(agentDir, "llm-conversation.jsonl.gz"))
		_, callsErr := os.Stat(filepath.Join(agentDir, "llm-calls.jsonl"))
		if convErr == nil || (callsErr == nil) != (mode == RecordMeta) {
			t.Errorf("--record %s: conversation %v, metering lines %v", mode, convErr, callsErr)
		}
	}
}

// countAdmitted counts the metering lines of calls the gateway took in: a
// request it refused, one the trial's end refused (uncounted: the lead's
// call after its DONE), or one whose body never arrived (an agent swept
// while sending it) is metered too but is no call used and has no
// conversation record.
func countAdmitted(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var r modelcall.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r.ErrorClass != modelcall.ClassBadRequest && !r.Uncounted && r.RequestArrived() {
			n++
		}
	}
	return n
}

func TestParseRecordMode(t *testing.T) {
	for in, want := range map[string]RecordMode{"": RecordFull, "full": RecordFull, "meta": RecordMeta, "none": RecordNone, "all": ""} {
		got, err := ParseRecordMode(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
}
