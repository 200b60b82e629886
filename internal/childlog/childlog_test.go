package childlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestStderrLines(t *testing.T) {
	var logs bytes.Buffer
	s := New(slog.New(slog.NewJSONHandler(&logs, nil)))
	for i := range 30 {
		s.Write([]byte("line " + string(rune('a'+i%26)) + "\r\n"))
	}
	s.Write([]byte("\n   \nunfinished"))
	last := strings.Split(s.Last(), "\n")
	if len(last) != Kept+1 || last[0] != "line k" || last[len(last)-1] != "unfinished" {
		t.Errorf("last words %q", last)
	}
	if n := strings.Count(logs.String(), `"msg":"child stderr"`); n != 30 {
		t.Errorf("%d lines logged, want 30", n)
	}
}
