//go:build linux

package inside

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestEnvPreamble: the environment comes back as written, and the bytes
// after it are left for the command.
func TestEnvPreamble(t *testing.T) {
	env := []string{"A=b", "KEY=sk-\n\"quoted\"=x", "EMPTY="}
	var buf bytes.Buffer
	if err := WriteEnvPreamble(&buf, env); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("the command's own input")
	got, err := ReadEnvPreamble(&buf)
	if err != nil || !slices.Equal(got, env) {
		t.Fatalf("%q %v", got, err)
	}
	if rest, _ := io.ReadAll(&buf); string(rest) != "the command's own input" {
		t.Errorf("left for the command: %q", rest)
	}
	for _, bad := range []string{"", "12", "x\n[]", "123456789\n", "2\n[", "3\n[1]"} {
		if _, err := ReadEnvPreamble(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzEnvPreamble(f *testing.F) {
	f.Add([]byte("9\n[\"A=b\"]rest"))
	f.Add([]byte("2\n[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := ReadEnvPreamble(bytes.NewReader(data))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := WriteEnvPreamble(&buf, env); err != nil {
			t.Fatal(err)
		}
		again, err := ReadEnvPreamble(&buf)
		if err != nil || !slices.Equal(again, env) {
			t.Fatalf("%q: read back %q %v", env, again, err)
		}
	})
}
