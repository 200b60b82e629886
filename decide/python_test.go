package decide

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// python runs testdata/check.py, the second implementation, with a
// command and an input, and decodes its answer. It skips the test when
// there is no python3: the Go figures are then checked against the
// published values alone.
func python(t *testing.T, cmd string, in, out any) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH: the check against the second implementation (testdata/check.py) needs it")
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	c := exec.CommandContext(t.Context(), py, "testdata/check.py", cmd)
	c.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	got, err := c.Output()
	if err != nil {
		t.Fatalf("python3 testdata/check.py %s: %v\n%s", cmd, err, stderr.String())
	}
	if err := json.Unmarshal(got, out); err != nil {
		t.Fatalf("python3 testdata/check.py %s: %v\n%s", cmd, err, got)
	}
}
