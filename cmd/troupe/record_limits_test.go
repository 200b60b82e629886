package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tamperedTrial is a trial folder whose lead-1 record holds one block of
// blockBytes that its one call names refs times.
func tamperedTrial(t *testing.T, blockBytes, refs int) string {
	t.Helper()
	dir := t.TempDir()
	var raw bytes.Buffer
	fmt.Fprintf(&raw, "{\"block\":\"b\",\"json\":{\"role\":\"user\",\"content\":\"%s\"}}\n", strings.Repeat("a", blockBytes))
	ids := strings.TrimSuffix(strings.Repeat(`"b",`, refs), ",")
	fmt.Fprintf(&raw, "{\"call\":1,\"time\":\"2026-12-01T10:00:00Z\",\"api\":\"openai\",\"status\":200,\"request\":{\"messages\":{\"$blocks\":[%s]}},\"answer\":{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"ok\"}}]}}\n", ids)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw.Bytes())
	zw.Close()
	rec := filepath.Join(dir, "agents", "lead-1", "llm-conversation.jsonl.gz")
	if err := os.MkdirAll(filepath.Dir(rec), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), []byte(`{"trial_name":"x","troupe_trial_id":"x-1","outcome":"passed","agents":[{"id":"lead-1","role":"lead"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "relay", "members.json"), `[{"id":"user","pubkey":"`+strings.Repeat("1", 64)+`"},{"id":"lead-1","pubkey":"`+strings.Repeat("2", 64)+`"}]`)
	return dir
}

// TestCommandsRefuseTamperedRecord: export atif and scenario from-trial,
// given a record a few hundred bytes long that names a 256 KiB block
// 4,000 times, refuse it with the record's file, the call and the limit,
// without building it; the limits are the commands' flags.
func TestCommandsRefuseTamperedRecord(t *testing.T) {
	bomb := tamperedTrial(t, 256<<10, 4000)
	small := tamperedTrial(t, 512<<10, 3) // 1.5 MiB whole
	for _, tc := range []struct {
		name string
		args []string
		ok   bool
		want []string
	}{
		{"export atif", []string{"export", "atif", bomb, "--out", t.TempDir()}, false, []string{"llm-conversation.jsonl.gz", "call 1", "134217728"}},
		{"scenario from-trial", []string{"scenario", "from-trial", bomb}, false, []string{"llm-conversation.jsonl.gz", "call 1", "134217728"}},
		{"export atif within the defaults", []string{"export", "atif", small, "--out", t.TempDir()}, true, []string{"1 model calls"}},
		{"export atif --max-call-mib 1", []string{"export", "atif", small, "--out", t.TempDir(), "--max-call-mib", "1"}, false, []string{"call 1", "1048576 per call"}},
		{"scenario from-trial --max-expanded-mib 1", []string{"scenario", "from-trial", small, "--max-expanded-mib", "1"}, false, []string{"call 1", "record's limit of 1048576"}},
		{"scenario from-trial within the defaults", []string{"scenario", "from-trial", small}, true, []string{"lead-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			code, out, errOut := troupe(t, tc.args...)
			runtime.ReadMemStats(&after)
			n := (after.TotalAlloc - before.TotalAlloc) >> 20
			t.Logf("exit %d, %d MiB allocated\n%.300s%.300s", code, n, out, errOut)
			if (code == exitOK) != tc.ok {
				t.Errorf("exit %d", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("the output does not say %q", w)
				}
			}
			if n > 64 {
				t.Errorf("the command allocated %d MiB", n)
			}
		})
	}
}
