package report

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeResults makes a job folder of n trial results: 5 conditions, n/50
// tasks, 10 attempts, outcomes from a fixed pattern.
func writeResults(b *testing.B, n int) string {
	dir := filepath.Join(b.TempDir(), "job")
	start := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	outcomes := []string{"passed", "failed", "passed", "failed", "failed", "passed", "unscored_infra", "verifier_error", "passed", "failed", "cancelled"}
	for i := range n {
		cond := fmt.Sprintf("cond-%d", i%5)
		task := fmt.Sprintf("task-%03d", (i/5)%(n/50))
		attempt := i/(5*(n/50)) + 1
		name := fmt.Sprintf("%s__%s__%d", task, cond, attempt)
		reward := 0.0
		out := outcomes[(i*7+i/5)%len(outcomes)]
		if out == "passed" {
			reward = 1
		}
		res := map[string]any{
			"trial_name": name, "task_name": task, "attempt": attempt, "condition": cond,
			"manifest_sha256": fmt.Sprintf("%064d", i%5), "outcome": out, "completion_reason": "declared_done", "reward": reward,
			"started_at": start, "finished_at": start.Add(time.Duration(30+i%60) * time.Second),
			"agent_result": map[string]any{"n_input_tokens": 5000, "n_cache_tokens": 100, "n_output_tokens": 800, "cost_usd": 0.01 + float64(i%13)/1000, "n_calls": 9},
			"agents": []map[string]any{
				{"id": "lead-1", "role": "lead", "kind": "orchestrator", "usage": map[string]any{"calls": 5, "input_tokens": 3000, "output_tokens": 500, "cost_usd": 0.006}},
				{"id": "worker-1", "role": "implementer", "kind": "worker", "usage": map[string]any{"calls": 4, "input_tokens": 2000, "output_tokens": 300, "cost_usd": 0.004}},
			},
		}
		data, _ := json.Marshal(res)
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "result.json"), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkCompare10k: troupe compare on 10,000 trial results.
//   - baseline: reading every result.json and decoding it into a map: the
//     least any tool reading those results does
//   - troupe: Load, Compare (intervals, pass@k, paired bootstraps of 10,000
//     resamples against the baseline condition) and the table
func BenchmarkCompare10k(b *testing.B) {
	dir := writeResults(b, 10_000)
	b.Run("baseline", func(b *testing.B) {
		for b.Loop() {
			n := 0
			filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() {
					return err
				}
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				var v map[string]any
				if json.Unmarshal(data, &v) == nil {
					n++
				}
				return nil
			})
			if n != 10_000 {
				b.Fatalf("%d results", n)
			}
		}
	})
	b.Run("troupe", func(b *testing.B) {
		for b.Loop() {
			trials, err := Load(dir)
			if err != nil || len(trials) != 10_000 {
				b.Fatalf("%d trials: %v", len(trials), err)
			}
			c, err := Compare(trials, "")
			if err != nil || len(c.Paired) != 4 {
				b.Fatalf("%v %+v", err, c)
			}
			if err := c.Write(io.Discard, FormatTable); err != nil {
				b.Fatal(err)
			}
		}
	})
}
