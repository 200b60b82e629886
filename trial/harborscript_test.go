package trial

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupebench/troupe/trial/outcome"
)

// bashTask is a task made as Harbor's sets make them, on an image that has
// bash (busybox and Debian's static bash, which .ci/test installs): a
// solve.sh without a shebang in bash's syntax (arrays, which neither dash
// nor busybox's sh know), and a test.sh whose shebang is on line 3 and
// which sources a file of bash's syntax.
func bashTask(t *testing.T) string {
	t.Helper()
	bash, err := os.ReadFile("/bin/bash-static")
	if err != nil {
		t.Fatalf("this test needs Debian's bash-static (bash .ci/test --install installs it): %v", err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"task.toml":              "version = \"1.0\"\n[agent]\ntimeout_sec = 120.0\n[verifier]\ntimeout_sec = 60.0\n[environment]\nbuild_timeout_sec = 120.0\nallow_internet = false\n",
		"instruction.md":         "Create /app/hello.txt containing Hello, world!\n",
		"environment/Dockerfile": "FROM busybox\nCOPY bash /bin/bash\nWORKDIR /app\n",
		"solution/solve.sh":      "set -o pipefail\nparts=(Hello, world!)\nprintf '%s %s\\n' \"${parts[0]}\" \"${parts[1]}\" | cat > /app/hello.txt\n",
		"tests/lib.sh":           "declare -A want=([file]=/app/hello.txt [text]='Hello, world!')\n",
		"tests/test.sh":          "# Verifier of a task whose shebang is not on its first line.\n\n#!/bin/bash\nsource /tests/lib.sh\nmkdir -p /logs/verifier\nif [[ \"$(cat \"${want[file]}\")\" == \"${want[text]}\" ]]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n",
	}
	for name, content := range files {
		write := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(write), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(write, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "environment", "bash"), bash, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestScriptsRunAsHarborRunsThem: solve.sh and test.sh run under bash, as
// Harbor runs them, when the image has it: a solution in bash's syntax
// without a shebang passes, and a test.sh that sources a file with its
// shebang on line 3 judges it. On an image without bash (hello-world's
// busybox), the scripts run as before and the verifier's stderr says why.
func TestScriptsRunAsHarborRunsThem(t *testing.T) {
	env := testEnv(t)
	res, dir := runOracle(t, env, bashTask(t))
	if res.Outcome != outcome.Passed {
		out, _ := os.ReadFile(filepath.Join(dir, "agents", "oracle", "stderr.log"))
		vout, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stderr.txt"))
		t.Fatalf("%s / %s %+v\noracle's stderr:\n%s\nverifier's stderr:\n%s", res.Outcome, res.CompletionReason, res.ExceptionInfo, out, vout)
	}
	res, dir = runOracle(t, env, helloWorld)
	vout, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stderr.txt"))
	if res.Outcome != outcome.Passed || !strings.Contains(string(vout), "troupe: this image has no bash, which Harbor runs /tests/test.sh with") {
		t.Errorf("hello-world on busybox: %s; the verifier's stderr: %q", res.Outcome, vout)
	}
}
