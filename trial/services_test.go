package trial

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/trial/outcome"
)

// TestServiceTaskKeepsTheAgentsServer: a task whose verifier needs the
// server the agent was asked to leave running passes when the sweep keeps
// what the agents detached (its declaration, under --services auto, or
// keep) and fails when it sweeps (today's way, --services sweep). Kept,
// the server is on the record with what it listens on, and the verdict
// says agent code ran during the verifier.
func TestServiceTaskKeepsTheAgentsServer(t *testing.T) {
	for _, c := range []struct {
		policy ServicesPolicy
		want   outcome.Outcome
	}{
		{ServicesAuto, outcome.Passed},
		{ServicesSweep, outcome.Failed},
	} {
		env := testEnv(t)
		env.Services = c.policy
		res, dir := runTrial(t, env, "testdata/manifests/service.yaml", "testdata/tasks/service")
		if res.Outcome != c.want {
			out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
			t.Errorf("--services %s: %s %+v, want %s; the verifier said:\n%s", c.policy, res.Outcome, res.ExceptionInfo, c.want, out)
			continue
		}
		kept := res.Sweep.Kept
		server := slices.IndexFunc(kept, func(p inside.Proc) bool { return strings.Contains(p.Cmd, "httpd") })
		switch c.policy {
		case ServicesAuto:
			if res.Services != "keep" || !res.AgentCodeDuringVerifier || server < 0 || !slices.Contains(kept[server].Listens, "tcp 127.0.0.1:8090") || kept[server].UID != agentUIDBase+1 {
				t.Errorf("kept: services %q, marked %v, kept %+v", res.Services, res.AgentCodeDuringVerifier, kept)
			}
			if log, _ := os.ReadFile(filepath.Join(dir, "trial.log")); !strings.Contains(string(log), "kept running into the verifier") {
				t.Error("trial.log does not name the kept server")
			}
		case ServicesSweep:
			if res.Services != "sweep" || res.AgentCodeDuringVerifier || len(kept) != 0 {
				t.Errorf("swept: services %q, marked %v, kept %+v", res.Services, res.AgentCodeDuringVerifier, kept)
			}
		}
	}
}

// TestLingeringProcessIsNamed: an agent leaves a detached loop that would
// write the verifier's reward. Kept (--services keep), it is listed in
// result.json with its command line and the verdict is marked; swept, it
// is killed, as any agent process.
func TestLingeringProcessIsNamed(t *testing.T) {
	for _, policy := range []ServicesPolicy{ServicesKeep, ServicesSweep} {
		env := testEnv(t)
		env.Services = policy
		res, _ := runTrial(t, env, "testdata/manifests/attack-linger.yaml", helloWorld)
		loop := func(p inside.Proc) bool { return strings.Contains(p.Cmd, "reward.txt") }
		if res.Sweep == nil {
			t.Fatalf("--services %s: no sweep report", policy)
		}
		switch policy {
		case ServicesKeep:
			if !slices.ContainsFunc(res.Sweep.Kept, loop) || !res.AgentCodeDuringVerifier {
				t.Errorf("kept: the loop is not listed, or the verdict not marked: %+v", res.Sweep)
			}
		case ServicesSweep:
			if slices.ContainsFunc(res.Sweep.Kept, loop) || !slices.ContainsFunc(res.Sweep.Signalled, loop) || res.AgentCodeDuringVerifier {
				t.Errorf("swept: the loop was not ended: %+v", res.Sweep)
			}
		}
	}
}
