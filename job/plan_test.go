package job

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// TestPlanOfASmallJob: two conditions on two tasks, twice, planned: the
// trials in their order (attempts outermost, conditions innermost), each
// with its agents' stacks; the stack both conditions run; the images of a
// Dockerfile task and of a compose task with a sidecar, named as a
// cluster finds them; and, read from a job folder with a finished trial,
// an unfinished one and one of other inputs, what is kept and what is
// redone, and why, without anything moved.
func TestPlanOfASmallJob(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "job")
	solo, wrong := cond(t, "../examples/manifests/solo.yaml"), cond(t, testdata("manifests", "wrong.yaml"))
	hello, compose := loadTask(t, helloWorld), loadTask(t, testdata("tasks", "compose"))
	p, err := NewPlan(Spec{Dir: dir, Conditions: []Condition{wrong, solo}, Tasks: []*task.Task{hello, compose}, Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tr := range p.Trials {
		names = append(names, tr.Name)
		if want := []AgentStack{{Agent: "solo-1", Stack: stack.Builtin}}; !slices.Equal(tr.Agents, want) || tr.State != ToRun {
			t.Errorf("%s: agents %v, state %s; want %v, run", tr.Name, tr.Agents, tr.State, want)
		}
	}
	want := []string{
		"hello-world__hello-solo-mock__1", "hello-world__test-wrong__1", "compose__hello-solo-mock__1", "compose__test-wrong__1",
		"hello-world__hello-solo-mock__2", "hello-world__test-wrong__2", "compose__hello-solo-mock__2", "compose__test-wrong__2",
	}
	if !slices.Equal(names, want) {
		t.Errorf("trials:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if len(p.Conditions) != 2 || p.Conditions[0].Name != "hello-solo-mock" || p.Conditions[0].ManifestHash != solo.Team.Manifest.Hash() || p.Conditions[1].Manifest != wrong.Path {
		t.Errorf("conditions %+v", p.Conditions)
	}
	if len(p.Tasks) != 2 || !reflect.DeepEqual(p.Tasks[1], PlanTask{Name: "compose", Path: compose.Dir, Digest: compose.Digest}) {
		t.Errorf("tasks %+v", p.Tasks)
	}
	builtin, _ := solo.Stacks.Resolve(stack.Builtin)
	if len(p.Stacks) != 1 || p.Stacks[0].Name != stack.Builtin || p.Stacks[0].Digest != builtin.Digest() || !slices.Equal(p.Stacks[0].Conditions, []string{"test-wrong", "hello-solo-mock"}) {
		t.Errorf("stacks %+v", p.Stacks)
	}
	checkPlanImages(t, p, hello, compose)
	checkResume(t, p, solo, hello, compose)
}

// checkPlanImages: each task's images, then their names on a cluster.
func checkPlanImages(t *testing.T, p *Plan, hello, compose *task.Task) {
	t.Helper()
	env := filepath.Join(compose.Dir, "environment")
	want := []Image{
		{Task: "hello-world", Context: hello.EnvDir},
		{Task: "compose", Context: env},
		{Task: "compose", Service: "kv", Context: filepath.Join(env, "kv"), Dockerfile: "Dockerfile.kv"},
	}
	if !slices.Equal(p.Images, want) {
		t.Fatalf("images:\n%+v\nwant:\n%+v", p.Images, want)
	}
	named := func(b runtime.BuildSpec) (string, error) {
		if b.Dockerfile == "Dockerfile.kv" {
			return "", errors.New("no name for it")
		}
		return "registry.example.com/troupe/" + filepath.Base(b.Context), nil
	}
	p.NameImages(named)
	for i, img := range p.Images {
		ref, err := named(img.Build())
		if i < 2 && (img.Ref != ref || img.Error != "") || i == 2 && (img.Ref != "" || img.Error != err.Error()) {
			t.Errorf("%s: named %q (%s), want %q (%v)", img.Name(), img.Ref, img.Error, ref, err)
		}
	}
	if got := p.Images[2].Name(); got != "compose/kv" {
		t.Errorf("a sidecar's image is called %q", got)
	}
}

// checkResume: the trials a job folder holds, kept or redone.
func checkResume(t *testing.T, p *Plan, solo Condition, hello, compose *task.Task) {
	t.Helper()
	result := func(name string, o outcome.Outcome, taskDigest string) {
		res := trialdir.TrialResult{Outcome: o, ManifestHash: solo.Team.Manifest.Hash(), TaskChecksum: taskDigest}
		data, _ := json.Marshal(res)
		if err := os.MkdirAll(filepath.Join(p.Dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.Dir, name, "result.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	result("hello-world__hello-solo-mock__1", outcome.Passed, hello.Digest)
	result("hello-world__hello-solo-mock__2", outcome.UnscoredInfra, hello.Digest)
	result("compose__hello-solo-mock__1", outcome.Failed, "sha256:another")
	os.MkdirAll(filepath.Join(p.Dir, "compose__test-wrong__2"), 0o755) // started, nothing written
	p.Resume()
	want := map[string]string{
		"hello-world__hello-solo-mock__1": "kept passed",
		"hello-world__hello-solo-mock__2": "redo unfinished",
		"compose__hello-solo-mock__1":     "redo other-inputs",
		"compose__test-wrong__2":          "redo unfinished",
	}
	for _, tr := range p.Trials {
		got := strings.TrimSpace(string(tr.State) + " " + tr.Why + string(tr.Outcome))
		if w := want[tr.Name]; got != w && (w != "" || got != "run") {
			t.Errorf("%s: %q, want %q", tr.Name, got, w)
		}
		if _, err := os.Stat(filepath.Join(p.Dir, tr.Name)); (err == nil) != (want[tr.Name] != "") {
			t.Errorf("%s: the folder's being there changed: %v", tr.Name, err)
		}
	}
	if p.Kept() != 1 {
		t.Errorf("%d kept, want 1", p.Kept())
	}
}
