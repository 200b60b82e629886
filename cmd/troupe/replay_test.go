package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayCommand: troupe replay of a recorded mock team trial
// reproduces it (exit 0); with the worker's persona changed it reports the
// first divergence, at worker-1's first call, with the diff (exit 4); a
// folder it cannot replay says why.
func TestReplayCommand(t *testing.T) {
	teamFile, helloWorld := repoPath(t, "examples/manifests/team.yaml"), repoPath(t, "examples/tasks/hello-world")
	dir := isolate(t)
	job := filepath.Join(dir, "job")
	code, out, errOut := troupe(t, "run", teamFile, "--tasks", helloWorld, "--out", job)
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	recorded := filepath.Join(job, "hello-world__hello-team-mock__1")

	code, out, errOut = troupe(t, "replay", recorded, "--out", filepath.Join(dir, "replay-1"))
	if code != exitOK || !strings.Contains(out, "reproduced: the replay played its recording") || !strings.Contains(out, "worker-1     3 of 3 recorded calls replayed") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
	}

	// The worker's persona, one line longer, pinned in a manifest of its own.
	code, persona, _ := troupe(t, "personas", "show", "worker")
	if code != exitOK {
		t.Fatal(persona)
	}
	persona += "Always say please.\n"
	write(t, filepath.Join(dir, "v2", "worker.md"), persona)
	data, err := os.ReadFile(teamFile)
	if err != nil {
		t.Fatal(err)
	}
	v2 := strings.Replace(string(data), `path: "troupe:worker"`, "path: worker.md", 1)
	v2 = strings.Replace(v2, "e0039537740e2c2b20439d7cfbcb65741cb7722807e73c21daf9481195ef289f", sum(persona), 1)
	write(t, filepath.Join(dir, "v2", "team.yaml"), v2)
	code, out, errOut = troupe(t, "replay", recorded, "--manifest", filepath.Join(dir, "v2", "team.yaml"), "--json", "--out", filepath.Join(dir, "replay-2"))
	if code != exitDiverged || !strings.Contains(errOut, "the manifest is not the recorded one") {
		t.Fatalf("changed persona: exit %d\n%s%s", code, out, errOut)
	}
	var report struct {
		Type       string `json:"type"`
		Reproduced bool   `json:"reproduced"`
		Outcome    string `json:"outcome"`
		Replay     struct {
			Divergences []struct {
				Agent string `json:"agent"`
				Call  int    `json:"call"`
				Diff  string `json:"diff"`
			} `json:"divergences"`
		} `json:"replay"`
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &report); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if report.Type != "replay_report" || report.Reproduced || report.Outcome != "cancelled" || len(report.Replay.Divergences) != 1 {
		t.Fatalf("%+v", report)
	}
	if d := report.Replay.Divergences[0]; d.Agent != "worker-1" || d.Call != 1 || !strings.Contains(d.Diff, "+    Always say please.") {
		t.Errorf("%+v", d)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay", job}, exitFailed, "is not a trial's folder (a job's?): give a trial folder, " + recorded},
		{[]string{"replay", dir}, exitFailed, "no result.json"},
		{[]string{"replay", recorded, "--out", filepath.Join(dir, "replay-1")}, exitFailed, "is not empty: a replay runs in a folder of its own"},
		{[]string{"replay", recorded, "--on-divergence", "retry"}, exitUsage, "give stop"},
		{[]string{"replay"}, exitUsage, "accepts 1 arg"},
	} {
		code, out, errOut := troupe(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d\n%s%s", tc.args, code, out, errOut)
		}
	}
	// A trial that kept no conversation has nothing to replay.
	code, out, errOut = troupe(t, "run", teamFile, "--tasks", helloWorld, "--out", filepath.Join(dir, "meta"), "--record", "meta")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = troupe(t, "replay", filepath.Join(dir, "meta", "hello-world__hello-team-mock__1"))
	if code != exitFailed || !strings.Contains(errOut, "--record meta or none") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}
