package job

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trial/trialtest"
	"golang.org/x/sync/errgroup"
)

// The job benchmarks: real jobs against the Docker Engine, mock models,
// the hello-world task (docs/benchmarks.md).

// dockerRunTrue is the baseline container (trialtest.DockerRunTrue).
func dockerRunTrue(b *testing.B) { trialtest.DockerRunTrue(b, runID) }

// BenchmarkJobThroughput: trials per hour at concurrency 1, 4 and 16,
// against bare containers started at the same concurrency.
func BenchmarkJobThroughput(b *testing.B) {
	for _, c := range []struct{ concurrency, trials int }{{1, 4}, {4, 8}, {16, 16}} {
		b.Run(fmt.Sprintf("c%d/baseline", c.concurrency), func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				var g errgroup.Group
				g.SetLimit(c.concurrency)
				for range c.trials {
					g.Go(func() error { dockerRunTrue(b); return nil })
				}
				g.Wait()
			}
			b.ReportMetric(perHour(c.trials*b.N, time.Since(start)), "trials/h")
		})
		b.Run(fmt.Sprintf("c%d/troupe", c.concurrency), func(b *testing.B) {
			env := benchEnv(b)
			start := time.Now()
			for b.Loop() {
				res, err := Run(b.Context(), env, Spec{Dir: filepath.Join(b.TempDir(), "job"), Conditions: []Condition{benchCondition(b, "../examples/manifests/solo.yaml")},
					Tasks: []*task.Task{benchTask(b)}, Attempts: c.trials, Concurrency: c.concurrency}, Progress{})
				if err != nil || res.Stats.Completed != c.trials {
					b.Fatalf("job: %v %+v", err, res)
				}
			}
			b.ReportMetric(perHour(c.trials*b.N, time.Since(start)), "trials/h")
		})
	}
}

// BenchmarkJobMemory: the orchestrator's peak resident memory with 32
// trials running at once (each agent works four seconds).
//   - baseline: the process with the relay and the gateway open, idle
//   - troupe: the peak during the job
func BenchmarkJobMemory(b *testing.B) {
	b.Run("c32/baseline", func(b *testing.B) {
		benchEnv(b)
		for b.Loop() {
			time.Sleep(10 * time.Millisecond)
		}
		b.ReportMetric(float64(rssBytes())/(1<<20), "peak-MB")
	})
	b.Run("c32/troupe", func(b *testing.B) {
		env := benchEnv(b)
		env.Gateway.Scenarios = os.DirFS(testdata("scenarios"))
		var peak int64
		for b.Loop() {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					peak = max(peak, rssBytes())
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
			})
			res, err := Run(b.Context(), env, Spec{Dir: filepath.Join(b.TempDir(), "job"), Conditions: []Condition{benchCondition(b, testdata("manifests", "slow.yaml"))},
				Tasks: []*task.Task{benchTask(b)}, Attempts: 32, Concurrency: 32}, Progress{})
			close(stop)
			wg.Wait()
			if err != nil || res.Stats.Completed != 32 {
				b.Fatalf("job: %v %+v", err, res.Stats)
			}
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
	})
}

func perHour(n int, d time.Duration) float64 { return float64(n) / d.Hours() }

// rssBytes is the process's resident memory, from /proc/self/status.
func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func benchCondition(b *testing.B, path string) Condition {
	return Condition{Path: path, Team: team(b, path)}
}

// benchEnv is testEnv for benchmarks.
func benchEnv(b *testing.B) *trial.Env {
	r, g := trialtest.Services(b, nil)
	return &trial.Env{Runtime: testRT, Relay: r, Gateway: g, Binary: trialtest.Binary(b), JobID: runID + "-bench", Version: "bench", Limits: trial.DefaultLimits}
}

func benchTask(b *testing.B) *task.Task { return loadTask(b, helloWorld) }
