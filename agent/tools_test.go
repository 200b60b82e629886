package agent

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func toolAgent(t *testing.T) *Agent {
	return New(Config{Workdir: t.TempDir()}, slog.New(slog.DiscardHandler))
}

// The tools' limits: what a model can ask for must neither exhaust the
// agent's memory nor block it.
func TestToolsStayBounded(t *testing.T) {
	a := toolAgent(t)
	dir := a.cfg.Workdir
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.txt")
	os.WriteFile(big, []byte("HEAD"+strings.Repeat("x", 1<<20)+"TAIL"), 0o644)
	tests := []struct {
		name, tool, args string
		failed           bool
		want             []string
		within           time.Duration
	}{
		{"a FIFO is not read", "read_file", `{"path":"pipe"}`, true, []string{"is not a regular file"}, 2 * time.Second},
		{"a device is not read", "read_file", `{"path":"/dev/zero"}`, true, []string{"is not a regular file"}, 2 * time.Second},
		{"a FIFO is not written", "write_file", `{"path":"pipe","content":"x"}`, true, []string{"is not a regular file"}, 2 * time.Second},
		{"a big file: its start and end", "read_file", `{"path":"big.txt"}`, false, []string{"HEAD", "TAIL", "bytes left out"}, 2 * time.Second},
		{"content must be a string", "write_file", `{"path":"a.txt","content":5}`, true, []string{"content must be a string"}, time.Second},
		{"gigabytes of output: start and end", "shell", `{"command":"echo FIRST; head -c 300000000 /dev/zero | tr '\\0' y; echo; echo LAST"}`, false, []string{"FIRST", "LAST", "bytes left out"}, 60 * time.Second},
		{"half a second is not zero", "shell", `{"command":"echo ok","timeout_seconds":0.5}`, false, []string{"exit 0", "ok"}, 5 * time.Second},
		{"a huge timeout does not overflow", "shell", `{"command":"echo ok","timeout_seconds":1e10}`, false, []string{"exit 0", "ok"}, 5 * time.Second},
		{"a background process keeps the output", "shell", `{"command":"echo started; sleep 30 & echo after"}`, false, []string{"started", "after", "was stopped"}, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res := a.runTool(t.Context(), tt.tool, tt.args)
			if took := time.Since(start); took > tt.within {
				t.Errorf("took %s", took)
			}
			if res.failed != tt.failed {
				t.Errorf("failed %v: %.300s", res.failed, res.content)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.content, w) {
					t.Errorf("result lacks %q: %.300s", w, res.content)
				}
			}
			if len(res.content) > outputCap+200 {
				t.Errorf("result of %d bytes", len(res.content))
			}
		})
	}
}

// With the agent's umask, what it writes is group-writable: teammates run
// as other uids of the same group.
func TestWrittenFilesAreGroupWritable(t *testing.T) {
	old := syscall.Umask(0o002)
	defer syscall.Umask(old)
	a := toolAgent(t)
	if res := a.runTool(t.Context(), "write_file", `{"path":"src/a.txt","content":"x"}`); res.failed {
		t.Fatal(res.content)
	}
	for p, want := range map[string]os.FileMode{"src": 0o775, "src/a.txt": 0o664} {
		info, err := os.Stat(filepath.Join(a.cfg.Workdir, p))
		if err != nil || info.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %v", p, info.Mode().Perm(), err, want)
		}
	}
}

func TestShrinkToolResultsKeepsTheNewest(t *testing.T) {
	var msgs []message
	for i := range 12 {
		msgs = append(msgs, message{Role: "assistant"}, message{Role: "tool", Content: text(fmt.Sprint(i) + strings.Repeat("x", 16<<10))})
	}
	shrinkToolResults(msgs, 64<<10)
	total := 0
	for i, m := range msgs {
		if m.Role != "tool" {
			continue
		}
		total += len(*m.Content)
		short := strings.Contains(*m.Content, "shortened from")
		if newest := i >= len(msgs)-6; newest == short {
			t.Errorf("message %d: shortened %v", i, short)
		}
	}
	if total > 64<<10 {
		t.Errorf("%d bytes of tool results, over the budget", total)
	}
}
