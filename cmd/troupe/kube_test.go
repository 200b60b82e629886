package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/kubernetes"
	"github.com/troupebench/troupe/runtime/kubernetes/kubetest"
	"github.com/troupebench/troupe/runtime/staticbin"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// kubeTroupe builds a static troupe, makes the images a cluster needs for
// the example task (troupe images build and binary, as a user would) and
// loads them into the test cluster. It returns the binary's path and a
// backend to look at the cluster with.
func kubeTroupe(t *testing.T) (string, *kubernetes.Kubernetes) {
	t.Helper()
	if why := kubetest.Skip(); why != "" {
		t.Skip(why)
	}
	ctx := t.Context()
	bin := filepath.Join(t.TempDir(), "troupe")
	if err := staticbin.Build(ctx, "../..", bin); err != nil {
		t.Fatal(err)
	}
	b, err := staticbin.Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"images", "build", "examples/tasks/hello-world"}, {"images", "binary"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("troupe %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	env, err := kubernetes.EnvironmentRef("", runtime.BuildSpec{Context: "../../examples/tasks/hello-world/environment"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{env, runtime.BinaryImageRef("", b)} {
		if err := kubetest.LoadImage(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	k := kubernetes.New(kubernetes.Options{Binary: b}, "test", nil)
	if err := k.Open(ctx); err != nil {
		t.Fatal(err)
	}
	return bin, k
}

// leftOnCluster lists the pods and policies of jobs whose id starts with
// prefix.
func leftOnCluster(t *testing.T, k *kubernetes.Kubernetes, prefix string) []runtime.Resource {
	t.Helper()
	all, err := k.List(context.Background(), map[string]string{runtime.LabelJob: ""})
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Resource
	for _, r := range all {
		if strings.HasPrefix(r.Labels[runtime.LabelJob], prefix) {
			out = append(out, r)
		}
	}
	return out
}

// TestKubernetesTeamJob: a job of 8 mock team trials at concurrency 4 on
// the cluster passes, its offline pods recorded as isolated by the
// cluster, with nothing left behind.
func TestKubernetesTeamJob(t *testing.T) {
	bin, k := kubeTroupe(t)
	out := filepath.Join(t.TempDir(), "kube-job")
	cmd := exec.Command(bin, "run", "examples/manifests/team.yaml", "--tasks", "examples/tasks/hello-world", "-k", "8", "-n", "4",
		"--runtime", "kubernetes", "--out", out)
	cmd.Dir = "../.."
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("troupe run --runtime kubernetes: %v\n%s", err, output)
	}
	var job job.Result
	readJSON(t, filepath.Join(out, "result.json"), &job)
	passed := 0
	for _, o := range job.Trials {
		if o == outcome.Passed {
			passed++
		}
	}
	if passed != 8 || len(job.Trials) != 8 {
		t.Errorf("%d of %d trials passed:\n%s", passed, len(job.Trials), output)
	}
	for name := range job.Trials {
		var r trialdir.TrialResult
		readJSON(t, filepath.Join(out, name, "result.json"), &r)
		if iso := r.Network.Isolation; iso == nil || iso.Runtime != "kubernetes" || !strings.Contains(iso.Requested, "NetworkPolicy") {
			t.Errorf("%s: isolation %+v", name, iso)
		}
		break
	}
	if left := leftOnCluster(t, k, "kube-job"); len(left) > 0 {
		t.Errorf("left on the cluster: %v", left)
	}
}

// TestKubernetesKillAndClean: troupe run killed with SIGKILL mid-job leaves
// its pods and policies; troupe clean --runtime kubernetes removes them all.
func TestKubernetesKillAndClean(t *testing.T) {
	bin, k := kubeTroupe(t)
	out := filepath.Join(t.TempDir(), "kube-kill")
	scenario, _ := filepath.Abs("../../trial/testdata/scenarios/slow.yaml")
	config := filepath.Join(t.TempDir(), "troupe.yaml")
	write(t, config, "endpoints:\n  mock/slow:\n    api: mock\n    scenario: "+scenario+"\n")
	cmd := exec.Command(bin, "run", "--config", config, "trial/testdata/manifests/slow.yaml", "--tasks", "examples/tasks/hello-world",
		"-k", "8", "-n", "4", "--runtime", "kubernetes", "--out", out)
	cmd.Dir = "../.."
	var output syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range leftOnCluster(t, k, "kube-kill") {
			k.Remove(context.Background(), r)
		}
	})
	deadline := time.Now().Add(3 * time.Minute)
	for len(leftOnCluster(t, k, "kube-kill")) < 2 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no pods appeared:\n%s", output.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if left := leftOnCluster(t, k, "kube-kill"); len(left) == 0 {
		t.Fatal("SIGKILL left nothing to clean: the test proves nothing")
	}
	clean := exec.Command(bin, "clean", "--runtime", "kubernetes")
	clean.Dir = "../.."
	cleaned, err := clean.CombinedOutput()
	if err != nil {
		t.Fatalf("troupe clean --runtime kubernetes: %v\n%s", err, cleaned)
	}
	if left := leftOnCluster(t, k, "kube-kill"); len(left) > 0 {
		t.Errorf("left after troupe clean:\n%v\nclean said:\n%s", left, cleaned)
	}
	if !strings.Contains(string(cleaned), "removed container") {
		t.Errorf("clean said:\n%s", cleaned)
	}
	os.RemoveAll(out)
}

// TestKubernetesPendingIsInfra: a trial whose pod no node can take ends
// unscored_infra with the scheduler's reason once --pending-timeout has
// passed, is retried, and the job exits 3 (trials not measured).
func TestKubernetesPendingIsInfra(t *testing.T) {
	bin, k := kubeTroupe(t)
	data, err := os.ReadFile("../../examples/manifests/team.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifestPath := filepath.Join(t.TempDir(), "huge.yaml")
	write(t, manifestPath, strings.Replace(string(data), "override_cpus: 1", "override_cpus: 512", 1))
	out := filepath.Join(t.TempDir(), "kube-pending")
	cmd := exec.Command(bin, "run", manifestPath, "--tasks", "examples/tasks/hello-world", "--runtime", "kubernetes",
		"--pending-timeout", "4s", "--retries", "1", "--out", out)
	cmd.Dir = "../.."
	output, err := cmd.CombinedOutput()
	if exitErr, ok := errors.AsType[*exec.ExitError](err); !ok || exitErr.ExitCode() != exitUnmeasured {
		t.Fatalf("a trial that cannot be scheduled: %v\n%s", err, output)
	}
	var job job.Result
	readJSON(t, filepath.Join(out, "result.json"), &job)
	if job.Stats.Retries != 1 {
		t.Errorf("retries: %d, want 1", job.Stats.Retries)
	}
	for name, o := range job.Trials {
		var r trialdir.TrialResult
		readJSON(t, filepath.Join(out, name, "result.json"), &r)
		if o != outcome.UnscoredInfra || r.ExceptionInfo == nil || !strings.Contains(r.ExceptionInfo.ExceptionMessage, "Insufficient cpu") {
			t.Errorf("%s: %s, %+v", name, o, r.ExceptionInfo)
		}
	}
	if left := leftOnCluster(t, k, "kube-pending"); len(left) > 0 {
		t.Errorf("left on the cluster: %v", left)
	}
}

// TestKubernetesConfig: the config file's kubernetes: section, read under
// the flags' keys; a bad value is an error at its line.
func TestKubernetesConfig(t *testing.T) {
	cfg, err := parseConfig("/etc/troupe/config.yaml", []byte("runtime: kubernetes\nkubernetes:\n  kubeconfig: kube/admin.yaml\n  context: c1\n  namespace: trials\n  image_repo: reg.example/troupe\n  pending_timeout: 90s\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"runtime": "kubernetes", "kubeconfig": "/etc/troupe/kube/admin.yaml", "kube_context": "c1", "namespace": "trials", "image_repo": "reg.example/troupe", "pending_timeout": "90s"}
	for key, v := range want {
		if cfg.settings[key] != v {
			t.Errorf("%s: %v, want %v", key, cfg.settings[key], v)
		}
	}
	for doc, msg := range map[string]string{
		"kubernetes:\n  pending_timeout: soon\n": "config.yaml:2:20: kubernetes.pending_timeout: must be a duration",
		"kubernetes:\n  namespaces: x\n":         "kubernetes.namespaces",
		"kubernetes: [a]\n":                      "kubernetes: must be a mapping",
	} {
		if _, err := parseConfig("config.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", doc, err, msg)
		}
	}
}
