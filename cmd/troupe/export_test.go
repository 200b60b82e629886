package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/atif/atiftest"
	"github.com/troupebench/troupe/modelcall"
)

// TestExportATIF: a mock team trial exports to ATIF; every file validates
// against Harbor's schema and the lead's trajectory has one agent step per
// model call of its call log.
func TestExportATIF(t *testing.T) {
	root, _ := filepath.Abs("../..")
	dir := isolate(t)
	job := filepath.Join(dir, "job")
	code, out, errOut := troupe(t, "run", filepath.Join(root, "examples/manifests/team.yaml"), "--tasks", filepath.Join(root, "examples/tasks/hello-world"), "--out", job)
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	trialDir := filepath.Join(job, "hello-world__hello-team-mock__1")
	code, out, errOut = troupe(t, "export", "atif", trialDir)
	if code != exitOK {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	atifDir := filepath.Join(trialDir, "atif")
	for _, name := range []string{"lead-1.json", "worker-1.json", "team.json"} {
		if !strings.Contains(out, filepath.Join(atifDir, name)) {
			t.Errorf("the output does not name %s:\n%s", name, out)
		}
	}
	files, _ := filepath.Glob(filepath.Join(atifDir, "*.json"))
	if len(files) < 3 {
		t.Fatalf("wrote %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := atiftest.Check(data); err != nil {
			t.Errorf("%s does not validate:\n%v", f, err)
		}
	}

	data, err := os.ReadFile(filepath.Join(atifDir, "lead-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lead struct {
		Steps []struct {
			Source          string `json:"source"`
			IsCopiedContext bool   `json:"is_copied_context"`
			ToolCalls       []any  `json:"tool_calls"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(data, &lead); err != nil {
		t.Fatal(err)
	}
	agentSteps, toolCalls := 0, 0
	for _, s := range lead.Steps {
		if s.Source == "agent" && !s.IsCopiedContext {
			agentSteps++
			toolCalls += len(s.ToolCalls)
		}
	}
	log, err := os.ReadFile(filepath.Join(trialDir, "agents", "lead-1", "llm-calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// A call the sweep cut before its request arrived, or the trial's end
	// refused (uncounted), has a metering line but no conversation record,
	// so no step.
	calls := 0
	for line := range strings.Lines(string(log)) {
		var r modelcall.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("llm-calls.jsonl: %v", err)
		}
		if r.RequestArrived() && !r.Uncounted {
			calls++
		}
	}
	if agentSteps != calls || calls == 0 || toolCalls == 0 {
		t.Errorf("lead-1: %d agent steps (%d tool calls) for %d calls in llm-calls.jsonl", agentSteps, toolCalls, calls)
	}

	// --out elsewhere; a trial folder without records keeps its team.
	for _, a := range []string{"lead-1", "worker-1", "worker-2"} {
		os.Remove(filepath.Join(trialDir, "agents", a, "llm-conversation.jsonl.gz"))
	}
	other := filepath.Join(dir, "other")
	code, out, errOut = troupe(t, "export", "atif", trialDir, "--out", other)
	if code != exitOK || !strings.Contains(out, filepath.Join(other, "team.json")) || !strings.Contains(out, "no trajectory for lead-1: no conversation record") {
		t.Errorf("export of a --record meta trial: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = troupe(t, "export", "atif", dir); code == exitOK || !strings.Contains(errOut, "not a trial folder") {
		t.Errorf("export of a folder that is no trial: exit %d: %s", code, errOut)
	}
}
