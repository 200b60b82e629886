package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trialdir"
)

// reproduceRuns is how many times the reproduction tests run their job.
const reproduceRuns = 10

// jobFigures is every figure a job's files give: what a scripted (mock)
// job must give the same on every run. Times, ids and latencies aside.
type jobFigures struct {
	Stats  job.Stats
	Costs  map[string]modelcall.USD // by condition
	Trials map[string]trialFigures
}

type trialFigures struct {
	Outcome, Reason string
	Result          any // agent_result
	Relay           trialdir.RelayCounts
	Agents          map[string]agentFigures
}

type agentFigures struct {
	Usage modelcall.Totals
	// Lines are the metering lines of llm-calls.jsonl, as figures.
	Lines []string
	// Recorded is the conversation record's calls.
	Recorded int
}

// readFigures reads a job folder's figures.
func readFigures(t *testing.T, dir string) jobFigures {
	t.Helper()
	var job job.Result
	readJSON(t, filepath.Join(dir, "result.json"), &job)
	f := jobFigures{Stats: job.Stats, Costs: map[string]modelcall.USD{}, Trials: map[string]trialFigures{}}
	for name, c := range job.Conditions {
		f.Costs[name] = c.CostUSD
	}
	for name := range job.Trials {
		var r trialdir.TrialResult
		readJSON(t, filepath.Join(dir, name, "result.json"), &r)
		tf := trialFigures{Outcome: string(r.Outcome), Reason: string(r.CompletionReason), Result: r.AgentResult, Relay: r.Relay, Agents: map[string]agentFigures{}}
		for _, a := range r.Agents {
			agentDir := filepath.Join(dir, name, "agents", a.ID)
			af := agentFigures{Usage: a.Usage}
			data, err := os.ReadFile(filepath.Join(agentDir, "llm-calls.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
				var l modelcall.Record
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Fatalf("%s: %v", agentDir, err)
				}
				af.Lines = append(af.Lines, fmt.Sprintf("%d %s in=%d cached=%d out=%d $%v uncounted=%v", l.Status, l.ErrorClass, l.InputTokens, l.CachedTokens, l.OutputTokens, l.CostUSD, l.Uncounted))
			}
			zr, err := gzipReader(filepath.Join(agentDir, "llm-conversation.jsonl.gz"))
			if err != nil {
				t.Fatal(err)
			}
			calls, _, err := modelcall.ReadConversation(zr)
			if err != nil {
				t.Fatalf("%s: %v", agentDir, err)
			}
			af.Recorded = len(calls)
			tf.Agents[a.ID] = af
		}
		f.Trials[name] = tf
	}
	return f
}

func gzipReader(path string) (*gzip.Reader, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return gzip.NewReader(bytes.NewReader(data))
}

// cpuStress keeps every core busy with shell loops until the test ends:
// the timing a scripted job must not depend on is at its worst.
func cpuStress(t *testing.T) {
	t.Helper()
	for range 2 * goruntime.NumCPU() {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
}

// checkReproduces runs a scripted team job reproduceRuns times under CPU
// stress and fails at the first figure of a run that is not the first
// run's, and unless the counts of each trial agree with each other.
func checkReproduces(t *testing.T, run func(out string)) {
	cpuStress(t)
	var first jobFigures
	for i := range reproduceRuns {
		out := filepath.Join(t.TempDir(), fmt.Sprint("job-", i))
		run(out)
		got := readFigures(t, out)
		for name, tf := range got.Trials {
			for id, a := range tf.Agents {
				counted := 0
				for _, l := range a.Lines {
					if !strings.HasSuffix(l, "uncounted=true") {
						counted++
					}
				}
				if int64(counted) != a.Usage.Calls || a.Recorded != counted {
					t.Errorf("run %d, %s, %s: %d calls in result.json, %d counted lines in llm-calls.jsonl, %d in the record:\n%s", i, name, id, a.Usage.Calls, counted, a.Recorded, strings.Join(a.Lines, "\n"))
				}
			}
		}
		if i == 0 {
			first = got
			if len(first.Trials) == 0 {
				t.Fatal("the job ran no trial")
			}
			continue
		}
		if !reflect.DeepEqual(got, first) {
			t.Fatalf("run %d differs from run 0:\n%s", i, figuresDiff(first, got))
		}
	}
}

// figuresDiff names what differs between two runs' figures.
func figuresDiff(a, b jobFigures) string {
	var out []string
	if a.Stats != b.Stats || !reflect.DeepEqual(a.Costs, b.Costs) {
		out = append(out, fmt.Sprintf("job: %+v %v, then %+v %v", a.Stats, a.Costs, b.Stats, b.Costs))
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range a.Trials {
			if !yield(n) {
				return
			}
		}
	}) {
		ta, tb := a.Trials[name], b.Trials[name]
		if !reflect.DeepEqual(ta, tb) {
			out = append(out, fmt.Sprintf("%s:\n  %+v\nthen\n  %+v", name, ta, tb))
		}
	}
	return strings.Join(out, "\n")
}

// TestScriptedJobReproduces: a mock team job on Docker, run ten times
// under CPU stress, gives the same figures every time: outcomes, calls,
// tokens and cost per agent, each metering line, the record's calls and
// the job's totals; and within each run its counts agree.
func TestScriptedJobReproduces(t *testing.T) {
	root, _ := filepath.Abs("../..")
	isolate(t)
	checkReproduces(t, func(out string) {
		code, stdout, stderr := troupe(t, "run", filepath.Join(root, "examples/manifests/team.yaml"), "--tasks", filepath.Join(root, "examples/tasks/hello-world"), "-k", "2", "-n", "2", "--out", out)
		if code != exitOK {
			t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
		}
	})
}

// TestKubernetesScriptedJobReproduces: the same on the cluster.
func TestKubernetesScriptedJobReproduces(t *testing.T) {
	bin, _ := kubeTroupe(t)
	checkReproduces(t, func(out string) {
		cmd := exec.Command(bin, "run", "examples/manifests/team.yaml", "--tasks", "examples/tasks/hello-world", "-k", "2", "-n", "2", "--runtime", "kubernetes", "--out", out)
		cmd.Dir = "../.."
		if output, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("troupe run --runtime kubernetes: %v\n%s", err, output)
		}
	})
}
