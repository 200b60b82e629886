package trialtest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/troupebench/troupe/stack"
)

// FileDigest is a file's sha256, as a stack pins it.
func FileDigest(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// PlainStack is a stack that is a plain binary following the contract (a
// copy of troupe's own, uploaded), started by a launcher script that reads
// the token from the variable the stack maps it to.
func PlainStack(t *testing.T) *stack.Stack {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(bin, Binary(t).Data, 0o755); err != nil {
		t.Fatal(err)
	}
	run := Testdata("stacks", "plain", "run.sh")
	return &stack.Stack{
		Name: "plain", Source: "the test",
		Files: []stack.File{
			{Path: bin, To: "/opt/plain/bin/agent", Mode: 0o755, SHA256: FileDigest(t, bin)},
			{Path: run, To: "/opt/plain/run.sh", Mode: 0o755, SHA256: FileDigest(t, run)},
		},
		Command:  []string{"/opt/plain/run.sh"},
		Env:      map[string]string{"MY_TOKEN": stack.ValueToken, "MY_MODEL": stack.ValueModel},
		FixedEnv: map[string]string{"PLAIN_MODE": "test"},
	}
}
