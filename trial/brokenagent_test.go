package trial

import (
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/trial/outcome"
)

// TestABrokenAgentIsUnscoredInfraAtOnce: a worker whose agent cannot work
// (a typo in the program a bridge hosts, an ACP agent or a one-shot one,
// or a one-shot agent whose first run fails) ends the trial within
// seconds as unscored_infra, with the agent's own error in
// exception_info: never as the team's failure at the deadline.
func TestABrokenAgentIsUnscoredInfraAtOnce(t *testing.T) {
	for name, tc := range map[string]struct {
		command []string
		kind    ErrorKind
		says    []string
	}{
		"acp program missing": {[]string{runtime.BinaryPath, "acp", "--", "/opt/goose/bin/goosee", "acp"}, ErrReadiness,
			[]string{"worker-1 exited before it was ready", "/opt/goose/bin/goosee", "no such file or directory"}},
		"cli program missing": {[]string{runtime.BinaryPath, "cli", "--", "/opt/crush/crsh", "run", "{prompt}"}, ErrReadiness,
			[]string{"worker-1 exited before it was ready", "the agent cannot start: /opt/crush/crsh: does not exist"}},
		"cli program not on PATH": {[]string{runtime.BinaryPath, "cli", "--", "crsh", "run", "{prompt}"}, ErrReadiness,
			[]string{"crsh is not found in the agent's PATH"}},
		"cli first run fails": {[]string{runtime.BinaryPath, "cli", "--", "/bin/sh", "-c", "echo 'crush: unknown flag: --yolo' >&2; exit 3", "sh", "{prompt}"}, ErrAgentStart,
			[]string{"agent worker-1 cannot work (it exited 78)", "the agent's first run failed", "exit status 3", "crush: unknown flag: --yolo"}},
	} {
		t.Run(name, func(t *testing.T) {
			st := &stack.Stack{Name: "acp-example", Source: "the test", Command: tc.command}
			start := time.Now()
			res, _ := runACP(t, "testdata/manifests/acp-example.yaml", st)
			if res.Outcome != outcome.UnscoredInfra || res.ExceptionInfo == nil || res.ExceptionInfo.ExceptionType != tc.kind {
				t.Fatalf("%s / %s %+v: want unscored_infra, %s", res.Outcome, res.CompletionReason, res.ExceptionInfo, tc.kind)
			}
			for _, want := range tc.says {
				if !strings.Contains(res.ExceptionInfo.ExceptionMessage, want) {
					t.Errorf("exception_message does not say %q:\n%s", want, res.ExceptionInfo.ExceptionMessage)
				}
			}
			// Teardown and the verifier's skip are the same as any trial's:
			// well under the 300 s deadline is what counts.
			if d := time.Since(start); d > 60*time.Second {
				t.Errorf("the trial took %s", d)
			}
			t.Logf("trial took %s", time.Since(start).Round(time.Millisecond))
		})
	}
}
