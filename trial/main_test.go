package trial

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupebench/troupe/examples"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/personas"
	"github.com/troupebench/troupe/relay"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/docker"
	"github.com/troupebench/troupe/runtime/runtimetest"
	"github.com/troupebench/troupe/task"
)

// The trial tests run real trials: the Docker Engine, the busybox image
// (bash .ci/seed-images), troupe's static binary built once, the embedded
// relay and the gateway playing mock scenarios.

var (
	testRT *docker.Docker
	runID  string
	// binary is troupe's static binary, built on first use: the fuzz
	// workers, which start no container, never build it.
	binary = sync.OnceValues(func() (*runtime.Binary, error) { return runtimetest.Binary(context.Background(), "..") })
)

// testBinary returns the binary or ends the test.
func testBinary(t testing.TB) *runtime.Binary {
	t.Helper()
	b, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	ctx := context.Background()
	b := make([]byte, 4)
	rand.Read(b)
	runID = "test-" + hex.EncodeToString(b)
	testRT = docker.New(runID, nil)
	if err := testRT.Open(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "these tests need a Docker engine: %v\n", err)
		return 1
	}
	defer testRT.Close(ctx)
	testRT.BinaryVolumePrefix = docker.DefaultBinaryVolumePrefix + runID + "-"
	code := m.Run()
	if _, err := testRT.RemoveBinaryVolumes(ctx, false); err != nil {
		fmt.Fprintf(os.Stderr, "remove the binary volumes: %v\n", err)
		code = 1
	}
	// Nothing of this run may be left in Docker.
	left, err := testRT.List(ctx, map[string]string{runtime.LabelJob: ""})
	for _, r := range left {
		if strings.HasPrefix(r.Labels[runtime.LabelJob], runID) {
			fmt.Fprintf(os.Stderr, "left behind: %s\n", r)
			testRT.Remove(ctx, r)
			code = 1
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// unionFS reads a file from the first FS that has it: the tests' own
// scenarios, then the built-in ones.
type unionFS []fs.FS

func (u unionFS) Open(name string) (fs.File, error) {
	for _, f := range u {
		if file, err := f.Open(name); err == nil {
			return file, nil
		}
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// services opens a relay and a gateway for one test's job.
func services(t testing.TB) (*relay.Relay, *llm.Gateway) {
	t.Helper()
	return servicesWith(t, nil)
}

// servicesWith opens them with the gateway's endpoints beside mock ones.
func servicesWith(t testing.TB, endpoints llm.Endpoints) (*relay.Relay, *llm.Gateway) {
	t.Helper()
	r := relay.New()
	if err := r.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("close relay: %v", err)
		}
	})
	g := llm.New(endpoints)
	g.Scenarios = unionFS{os.DirFS("testdata/scenarios"), examples.Scenarios()}
	if err := g.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			t.Errorf("close gateway: %v", err)
		}
	})
	return r, g
}

// testEnv is a job environment for one test.
func testEnv(t *testing.T) *Env {
	return testEnvWith(t, nil)
}

// testEnvWith is a job environment whose gateway has endpoints.
func testEnvWith(t *testing.T, endpoints llm.Endpoints) *Env {
	r, g := servicesWith(t, endpoints)
	env := &Env{Runtime: testRT, Relay: r, Gateway: g, Binary: testBinary(t), JobID: runID + "-" + t.Name(), Version: "test", Limits: DefaultLimits}
	// The test is the job: its network goes when it ends.
	t.Cleanup(func() {
		if err := testRT.EndJob(context.Background(), env.JobID); err != nil {
			t.Error(err)
		}
	})
	return env
}

// team loads and verifies a manifest.
func team(t testing.TB, file string) *manifest.Team {
	t.Helper()
	m, err := manifest.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := m.Verify(manifest.Sources{Dir: filepath.Dir(file), Builtin: personas.FS()})
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func loadTask(t testing.TB, dir string) *task.Task {
	t.Helper()
	tk, err := task.Load(dir, task.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}
