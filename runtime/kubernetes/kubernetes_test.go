package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/docker"
	"github.com/troupebench/troupe/runtime/execstream"
	"github.com/troupebench/troupe/runtime/kubernetes/kubetest"
	"github.com/troupebench/troupe/runtime/runtimetest"
)

// The cluster tests run against a real apiserver and kubelet when
// TROUPE_K8S_E2E=1 (.ci/kube-up); every pod and policy they make carries
// troupe.job=<runID>, and TestMain fails the run if any is left behind.

const testImage = "busybox:latest"

var (
	runID   string
	backend *Kubernetes
	skip    string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if skip = kubetest.Skip(); skip != "" {
		return m.Run()
	}
	ctx := context.Background()
	b := make([]byte, 4)
	rand.Read(b)
	runID = "test-" + hex.EncodeToString(b)
	k, err := open(ctx, runID, 20*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	backend = k
	code := m.Run()
	k.Close(ctx)
	left, err := k.List(ctx, map[string]string{runtime.LabelJob: runID})
	if err != nil || len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: left behind on the cluster: %v %v\n", left, err)
		for _, r := range left {
			k.Remove(ctx, r)
		}
		code = 1
	}
	return code
}

// open builds troupe's binary and its image, loads the image into the
// cluster, and opens a backend with it.
func open(ctx context.Context, version string, pending time.Duration) (*Kubernetes, error) {
	bin, err := runtimetest.Binary(ctx, "../..")
	if err != nil {
		return nil, err
	}
	d := docker.New(version, nil)
	if err := d.Open(ctx); err != nil {
		return nil, err
	}
	defer d.Close(ctx)
	ref := runtime.BinaryImageRef("", bin)
	if _, err := d.BuildBinaryImage(ctx, bin, ref); err != nil {
		return nil, err
	}
	if err := kubetest.LoadImage(ctx, ref); err != nil {
		return nil, err
	}
	k := New(Options{Binary: bin, PendingTimeout: pending}, version, nil)
	if err := k.Open(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

func cluster(t *testing.T) *Kubernetes {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	return backend
}

func TestConformance(t *testing.T) {
	k := cluster(t)
	runtimetest.Run(t, k, runtimetest.Config{Image: testImage, Labels: map[string]string{runtime.LabelJob: runID}})
}

// TestPendingPod: a pod that no node can take fails its start once the
// pending bound has passed, with the scheduler's reason, and is removed.
func TestPendingPod(t *testing.T) {
	k := cluster(t)
	ctx := context.Background()
	c, err := k.Create(ctx, runtime.ContainerSpec{Image: testImage, Entrypoint: []string{runtime.BinaryPath, "init"},
		CPUs: 512, Labels: map[string]string{runtime.LabelJob: runID, runtime.LabelTrial: "pending"}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.Start(ctx)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "Pending after") || !strings.Contains(err.Error(), "Insufficient cpu") {
		t.Errorf("a pod asking for 512 CPUs: %v", err)
	}
	if took < k.opts.PendingTimeout || took > k.opts.PendingTimeout+15*time.Second {
		t.Errorf("it failed after %s; the bound is %s", took, k.opts.PendingTimeout)
	}
	if err := k.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: c.ID()}); err != nil {
		t.Fatal(err)
	}
}

// TestImages: an image the nodes do not have fails at once, saying so; a
// task with only a Dockerfile says how to build and push it; busybox is
// probed as root with no working folder of its own.
func TestImages(t *testing.T) {
	k := cluster(t)
	ctx := context.Background()
	start := time.Now()
	_, err := k.Image(ctx, runtime.ImageSpec{Image: "troupe.local/no-such-image:1"})
	if !errors.Is(err, ErrImageUnavailable) || time.Since(start) > 10*time.Second {
		t.Errorf("a missing image, after %s: %v", time.Since(start), err)
	}
	dir := t.TempDir()
	os.WriteFile(dir+"/Dockerfile", []byte("FROM busybox:latest\nRUN touch /x\n"), 0o644)
	_, err = k.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}})
	ref, _ := EnvironmentRef("", runtime.BuildSpec{Context: dir})
	if err == nil || !strings.Contains(err.Error(), "troupe images build") || !strings.Contains(err.Error(), ref) {
		t.Errorf("an environment not built: %v", err)
	}
	img, err := k.Image(ctx, runtime.ImageSpec{Image: testImage})
	if err != nil || img.User != "" || img.WorkDir != "" || img.Ref != testImage {
		t.Errorf("busybox: %+v %v", img, err)
	}
	// Without troupe's binary image on the nodes, the first image says so.
	other := New(Options{Binary: &runtime.Binary{SHA256: strings.Repeat("0", 64)}, PendingTimeout: k.opts.PendingTimeout}, runID, nil)
	if err := other.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	_, err = other.Image(ctx, runtime.ImageSpec{Image: testImage})
	if err == nil || errors.Is(err, ErrImageUnavailable) || !strings.Contains(err.Error(), "troupe images binary") || !strings.Contains(err.Error(), other.binImage) {
		t.Errorf("the binary image missing: %v", err)
	}
}

func TestLabelValues(t *testing.T) {
	for _, v := range []string{"", "job-1", "host:boot:12:34", strings.Repeat("a", 64), "-x", "a b", "hello-world__3f2a_1"} {
		got := labelValue(v)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("labelValue(%q) = %q: %v", v, got, errs)
		}
		if ok := len(validation.IsValidLabelValue(v)) == 0; ok && got != v {
			t.Errorf("a valid value %q was changed to %q", v, got)
		}
	}
	if labelValue("a:b") == labelValue("a:c") {
		t.Error("two values, one label")
	}
	m, err := meta("p", map[string]string{runtime.LabelOwner: "h:b:1:2", runtime.LabelJob: "j"})
	if err != nil {
		t.Fatal(err)
	}
	if got := exactLabels(m); got[runtime.LabelOwner] != "h:b:1:2" || got[runtime.LabelJob] != "j" {
		t.Errorf("labels read back: %v", got)
	}
	if _, err := meta("p", map[string]string{"bad key!": "v"}); err == nil {
		t.Error("a key Kubernetes refuses was accepted")
	}
}

// TestProbeBound: an image's probe waits at least probeMinPending, however
// short --pending-timeout is (a loaded node may take seconds to run it),
// and the pending timeout when it is longer.
func TestProbeBound(t *testing.T) {
	for _, tt := range []struct{ pending, want time.Duration }{
		{0, DefaultPendingTimeout},
		{4 * time.Second, probeMinPending},
		{probeMinPending, probeMinPending},
		{10 * time.Minute, 10 * time.Minute},
	} {
		k := New(Options{PendingTimeout: tt.pending}, "test", nil)
		if got := k.probeBound(); got != tt.want {
			t.Errorf("pending timeout %v: the probe waits %v, want %v", tt.pending, got, tt.want)
		}
	}
}

// TestLifecycleWithoutCluster: New does no I/O and starts nothing, so a
// backend never opened (troupe doctor's, when the cluster does not
// answer) closes at once.
func TestLifecycleWithoutCluster(t *testing.T) {
	k := New(Options{}, "test", nil)
	if k.life != nil || k.cs != nil {
		t.Error("New made a context or a client")
	}
	done := make(chan error, 1)
	go func() { done <- k.Close(t.Context()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("closing a backend never opened: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing a backend never opened hangs")
	}
}

func TestPodNames(t *testing.T) {
	for _, trial := range []string{"", "hello-world__abc_1", "UPPER_and.dots", strings.Repeat("x", 200), "--"} {
		name := podName(map[string]string{runtime.LabelTrial: trial})
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("podName(%q) = %q: %v", trial, name, errs)
		}
	}
}

// TestPodSpec: what a trial pod is given and denied.
func TestPodSpec(t *testing.T) {
	k := New(Options{Binary: &runtime.Binary{SHA256: strings.Repeat("ab", 32)}}, "v", nil)
	k.binImage = runtime.BinaryImageRef("", k.opts.Binary)
	for _, tc := range []struct {
		network     string
		online      bool
		wantOffline bool
	}{
		{runtime.NetworkNone, false, true},
		{runtime.NetworkBridge, true, false},
		{runtime.NetworkBridge, false, true},
	} {
		p := &pod{name: "p", online: tc.online, spec: runtime.ContainerSpec{Image: "img", Network: tc.network, User: "0:0", CPUs: 1.5, MemoryMB: 512, Entrypoint: []string{runtime.BinaryPath, "init"}}}
		spec, err := k.podSpec(p)
		if err != nil {
			t.Fatal(err)
		}
		s := spec.Spec
		main := s.Containers[0]
		if *s.AutomountServiceAccountToken || *s.EnableServiceLinks || *s.TerminationGracePeriodSeconds > 5 || s.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("pod spec: token %v, links %v, grace %d, restart %s", *s.AutomountServiceAccountToken, *s.EnableServiceLinks, *s.TerminationGracePeriodSeconds, s.RestartPolicy)
		}
		if *main.SecurityContext.AllowPrivilegeEscalation || main.SecurityContext.Capabilities != nil || *main.SecurityContext.RunAsUser != 0 {
			t.Errorf("main container's security: %+v", main.SecurityContext)
		}
		if main.Resources.Limits.Cpu().MilliValue() != 1500 || main.Resources.Requests.Memory().Value() != 512<<20 {
			t.Errorf("resources: %+v", main.Resources)
		}
		init := s.InitContainers[0]
		offline := slices.Contains(init.Command, "--link-down") && init.SecurityContext.Capabilities != nil &&
			slices.Equal(init.SecurityContext.Capabilities.Add, []corev1.Capability{"NET_ADMIN"})
		if len(s.InitContainers) != 1 || offline != tc.wantOffline || init.Image != k.binImage || (!tc.wantOffline && init.SecurityContext.Capabilities != nil) {
			t.Errorf("network %s online %v: init containers %+v", tc.network, tc.online, s.InitContainers)
		}
	}
	if _, err := k.podSpec(&pod{spec: runtime.ContainerSpec{User: "app"}}); err == nil {
		t.Error("a user by name was accepted for a pod")
	}
}

func TestStuck(t *testing.T) {
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: "img",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}}}}
	}
	for reason, want := range map[string]string{"ErrImagePull": "image img", "ErrImageNeverPull": "image img", "CreateContainerConfigError": "CreateContainerConfigError", "ContainerCreating": "", "PodInitializing": ""} {
		if got := stuck(waiting(reason)); (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: %q", reason, got)
		}
	}
	failed := &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: binContainer,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "no space"}}}}}}
	if got := stuck(failed); !strings.Contains(got, "troupe-bin exited 1") {
		t.Errorf("a failed init container: %q", got)
	}
}

// TestExecAs: every exec runs through troupe exec-as with the spec's user
// and folder, the command after "--" untouched, and the environment, which
// holds keys and tokens, never on the command line.
func TestExecAs(t *testing.T) {
	got := execAs(runtime.ExecSpec{Cmd: []string{"sh", "-c", "echo --user"}, User: "1:2", WorkDir: "/w", Env: []string{"A=b", "KEY=sk-secret"}})
	want := []string{runtime.BinaryPath, "exec-as", "--user", "1:2", "--workdir", "/w", "--env-stdin", "--", "sh", "-c", "echo --user"}
	if !slices.Equal(got, want) {
		t.Errorf("execAs:\n got %q\nwant %q", got, want)
	}
	if got := execAs(runtime.ExecSpec{Cmd: []string{"true"}}); !slices.Equal(got, []string{runtime.BinaryPath, "exec-as", "--", "true"}) {
		t.Errorf("a plain exec: %q", got)
	}
}

// TestExitOf: how a stream's end becomes an exit code.
func TestExitOf(t *testing.T) {
	live := context.Background()
	cut, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name     string
		err      error
		ctx      context.Context
		output   string
		code     int
		wantErr  error
		wantText string
	}{
		{"exit 0", nil, live, "", 0, nil, ""},
		{"exit 3", utilexec.CodeExitError{Err: errors.New("x"), Code: 3}, live, "", 3, nil, ""},
		{"not found", utilexec.CodeExitError{Err: errors.New("x"), Code: 127}, live, "troupe exec-as: nope: not found", 127, runtime.ErrNotFound, ""},
		{"not executable", utilexec.CodeExitError{Err: errors.New("x"), Code: 126}, live, "troupe exec-as: /f: permission denied", 126, runtime.ErrNotExecutable, ""},
		{"closed", errors.New("stream reset"), cut, "", -1, execstream.ErrDetached, ""},
		{"apiserver gone", errors.New("connection refused"), live, "", -1, nil, "connection refused"},
	} {
		code, err := exitOf(tc.ctx, tc.err, []string{"cmd"}, tc.output, "pod")
		if code != tc.code || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || (tc.wantErr == nil && tc.wantText == "" && err != nil) ||
			(tc.wantText != "" && (err == nil || !strings.Contains(err.Error(), tc.wantText))) {
			t.Errorf("%s: %d, %v", tc.name, code, err)
		}
	}
}
