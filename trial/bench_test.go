package trial

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/kubernetes"
	"github.com/troupebench/troupe/runtime/kubernetes/kubetest"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trial/trialtest"
	"github.com/troupebench/troupe/trialdir"
)

// dockerRunTrue is the baseline container (trialtest.DockerRunTrue).
func dockerRunTrue(b *testing.B) { trialtest.DockerRunTrue(b, runID) }

// BenchmarkTrialOverhead: one mock solo trial of hello-world, against a bare
// container.
//   - baseline: docker run --rm --network none busybox true
//   - troupe: a whole trial (image check, container with troupe's binary,
//     tunnel, agent, readiness, task, DONE:, sweep, verifier, teardown,
//     results). ms/trial is its orchestration overhead: the trial's time
//     less the agents' work and the verifier's.
func BenchmarkTrialOverhead(b *testing.B) {
	b.Run("baseline", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			dockerRunTrue(b)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/trial")
	})
	b.Run("troupe", func(b *testing.B) {
		tm, tk := benchInputs(b, "../examples/manifests/solo.yaml")
		trialOverhead(b, benchEnv(b), tm, tk, nil)
	})
}

// BenchmarkTrialNetwork: what a network costs a trial, against a bare
// container on Docker's default bridge.
//   - baseline: docker run --rm busybox true (the default bridge)
//   - public: a whole solo trial of hello-world whose task asks for the
//     internet: a bridge network of the trial's own
//   - allowlist: the same with an allowlist: no network, troupe's egress
//     proxy on the host and the tunnel's third port
//
// ms/trial is the orchestration overhead, as in BenchmarkTrialOverhead.
func BenchmarkTrialNetwork(b *testing.B) {
	b.Run("baseline", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			out, err := exec.Command("docker", "run", "--rm", "--label", runtime.LabelJob+"="+runID+"-bench", "busybox", "true").CombinedOutput()
			if err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/trial")
	})
	for _, n := range []task.Network{{Mode: task.Public}, {Mode: task.Allowlist, AllowedHosts: []string{"pypi.org"}}} {
		b.Run(string(n.Mode), func(b *testing.B) {
			tm, tk := benchInputs(b, "../examples/manifests/solo.yaml")
			tk.AgentNetwork, tk.VerifierNetwork = n, n
			trialOverhead(b, benchEnv(b), tm, tk, func(res *trialdir.TrialResult) bool { return res.Network.Agents.Given.Mode == string(n.Mode) })
		})
	}
}

// trialOverhead runs b.N whole trials and reports their orchestration
// overhead in ms/trial: each trial's time less the agents' work and the
// verifier's. ok, when set, checks each result further.
func trialOverhead(b *testing.B, env *Env, tm *manifest.Team, tk *task.Task, ok func(*trialdir.TrialResult) bool) {
	var overhead time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		res, err := Run(b.Context(), env, Spec{Name: fmt.Sprintf("bench__%d", i), Dir: filepath.Join(b.TempDir(), "t"), Team: tm, ManifestPath: "solo.yaml", Task: tk, Attempt: 1}, nil)
		if err != nil || res.Outcome != outcome.Passed || (ok != nil && !ok(res)) {
			b.Fatalf("trial: %v %+v", err, res)
		}
		work := res.AgentExecution.FinishedAt.Sub(*res.AgentExecution.StartedAt) + res.Verifier.FinishedAt.Sub(*res.Verifier.StartedAt)
		overhead += time.Since(start) - work
	}
	b.ReportMetric(float64(overhead.Milliseconds())/float64(b.N), "ms/trial")
}

// benchEnv is testEnv for benchmarks.
func benchEnv(b *testing.B) *Env {
	r, g := services(b)
	return &Env{Runtime: testRT, Relay: r, Gateway: g, Binary: testBinary(b), JobID: runID + "-bench", Version: "bench", Limits: DefaultLimits}
}

func benchInputs(b *testing.B, manifestPath string) (*manifest.Team, *task.Task) {
	return team(b, manifestPath), benchTask(b)
}

func benchTask(b *testing.B) *task.Task { return loadTask(b, helloWorld) }

// BenchmarkPodTrialOverhead: one mock solo trial of hello-world on the
// Kubernetes backend against the same trial on Docker, in the same run
// (TROUPE_K8S_E2E=1, .ci/kube-up; skipped without a cluster).
//   - baseline: docker run --rm --network none busybox true
//   - docker: the trial on the Docker Engine
//   - kubernetes: the trial in a pod on the cluster (its image and
//     troupe's binary image loaded into the node first)
//
// ms/trial is the orchestration overhead, as in BenchmarkTrialOverhead.
func BenchmarkPodTrialOverhead(b *testing.B) {
	if why := kubetest.Skip(); why != "" {
		b.Skip(why)
	}
	tm, tk := benchInputs(b, "../examples/manifests/solo.yaml")
	b.Run("baseline", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			dockerRunTrue(b)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/trial")
	})
	b.Run("docker", func(b *testing.B) { trialOverhead(b, benchEnv(b), tm, tk, nil) })
	b.Run("kubernetes", func(b *testing.B) {
		env := benchEnv(b)
		env.Runtime = podRuntime(b, env.Binary, tk)
		trialOverhead(b, env, tm, tk, nil)
	})
}

// podRuntime opens the Kubernetes backend with troupe's binary image and
// the task's environment loaded into the test cluster, as troupe images
// binary and build (and a load) would make them.
func podRuntime(b *testing.B, bin *runtime.Binary, tk *task.Task) Backend {
	ctx := b.Context()
	spec := imageSpec(tk.MainImage())
	tag, _, err := testRT.BuildEnvironment(ctx, *spec.Build)
	if err != nil {
		b.Fatal(err)
	}
	env, err := kubernetes.EnvironmentRef("", *spec.Build)
	if err != nil {
		b.Fatal(err)
	}
	binRef := runtime.BinaryImageRef("", bin)
	if err := testRT.Tag(ctx, tag, env); err != nil {
		b.Fatal(err)
	}
	if _, err := testRT.BuildBinaryImage(ctx, bin, binRef); err != nil {
		b.Fatal(err)
	}
	for _, ref := range []string{env, binRef} {
		if err := kubetest.LoadImage(ctx, ref); err != nil {
			b.Fatal(err)
		}
	}
	k := kubernetes.New(kubernetes.Options{Binary: bin}, "bench", nil)
	if err := k.Open(ctx); err != nil {
		b.Fatal(err)
	}
	// A job probes an image's user and folder once, before its first
	// trial: not part of each trial's cost.
	if _, err := k.Image(ctx, spec); err != nil {
		b.Fatal(err)
	}
	return k
}
