// Package trialtest is the scaffolding of the tests that run real trials,
// for tests only: the _test.go files of packages trial and job import it,
// and no other code may. It opens the Docker Engine once per test binary
// and checks that nothing the tests created is left in it; it builds
// troupe's static binary once; it opens a relay and a gateway per test,
// whose mock models play trial/testdata/scenarios beside the built-in
// ones; it loads manifests and tasks; and it checks a trial folder for
// secrets.
//
// It cannot name trial.Env: package trial's own tests import it. A test
// makes its Env of the Parts that Open returns.
package trialtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
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

// moduleDir is the module's root folder, found from this file's path: the
// tests of trial and job run in folders of their own.
var moduleDir = func() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file))) // <module>/trial/trialtest/trialtest.go
}()

// Testdata is the path of a file or folder under trial/testdata, the
// manifests, tasks, scenarios and stacks the trial tests share.
func Testdata(elem ...string) string {
	return filepath.Join(append([]string{moduleDir, "trial", "testdata"}, elem...)...)
}

// Main opens the Docker Engine for a test binary, gives it to ready with
// the run id that labels everything the tests create, runs the tests, and
// then fails the binary when anything of this run is left in Docker (each
// such thing is named and removed). It returns the exit code for os.Exit.
func Main(m *testing.M, ready func(d *docker.Docker, runID string)) int {
	ctx := context.Background()
	b := make([]byte, 4)
	rand.Read(b)
	runID := "test-" + hex.EncodeToString(b)
	d := docker.New(runID, nil)
	if err := d.Open(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "these tests need a Docker engine: %v\n", err)
		return 1
	}
	defer d.Close(ctx)
	d.BinaryVolumePrefix = docker.DefaultBinaryVolumePrefix + runID + "-"
	ready(d, runID)
	code := m.Run()
	if _, err := d.RemoveBinaryVolumes(ctx, false); err != nil {
		fmt.Fprintf(os.Stderr, "remove the binary volumes: %v\n", err)
		code = 1
	}
	// Nothing of this run may be left in Docker.
	left, err := d.List(ctx, map[string]string{runtime.LabelJob: ""})
	for _, r := range left {
		if strings.HasPrefix(r.Labels[runtime.LabelJob], runID) {
			fmt.Fprintf(os.Stderr, "left behind: %s\n", r)
			d.Remove(ctx, r)
			code = 1
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// binary is troupe's static binary, built on first use: the fuzz workers,
// which start no container, never build it.
var binary = sync.OnceValues(func() (*runtime.Binary, error) {
	return runtimetest.Binary(context.Background(), moduleDir)
})

// Binary returns troupe's static binary, or ends the test.
func Binary(t testing.TB) *runtime.Binary {
	t.Helper()
	b, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Scenarios are the mock scenarios the tests' gateways play: the tests'
// own (trial/testdata/scenarios), then the built-in ones.
func Scenarios() fs.FS {
	return unionFS{os.DirFS(Testdata("scenarios")), examples.Scenarios()}
}

// unionFS reads a file from the first FS that has it.
type unionFS []fs.FS

func (u unionFS) Open(name string) (fs.File, error) {
	for _, f := range u {
		if file, err := f.Open(name); err == nil {
			return file, nil
		}
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// Services opens a relay and a gateway for one test, with the gateway's
// endpoints beside the mock ones (Scenarios); both close when it ends.
func Services(t testing.TB, endpoints llm.Endpoints) (*relay.Relay, *llm.Gateway) {
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
	g.Scenarios = Scenarios()
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

// Parts are what a test's trial.Env is made of.
type Parts struct {
	Runtime *docker.Docker
	Relay   *relay.Relay
	Gateway *llm.Gateway
	Binary  *runtime.Binary
	// JobID is the test's own, under the run id: the test is the job.
	JobID string
}

// Open opens the parts of one test's job environment on d (Main's), its
// gateway with endpoints beside the mock ones. The job's network goes
// when the test ends.
func Open(t *testing.T, d *docker.Docker, runID string, endpoints llm.Endpoints) Parts {
	r, g := Services(t, endpoints)
	p := Parts{Runtime: d, Relay: r, Gateway: g, Binary: Binary(t), JobID: runID + "-" + t.Name()}
	t.Cleanup(func() {
		if err := d.EndJob(context.Background(), p.JobID); err != nil {
			t.Error(err)
		}
	})
	return p
}

// Team loads and verifies a manifest, its personas from the built-in
// library or beside it.
func Team(t testing.TB, file string) *manifest.Team {
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

// Task loads a task folder.
func Task(t testing.TB, dir string) *task.Task {
	t.Helper()
	tk, err := task.Load(dir, task.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// DockerRunTrue runs the benchmarks' baseline container, the docker
// command line's `docker run --rm --network none busybox true`, labelled
// with runID's bench job.
func DockerRunTrue(b *testing.B, runID string) {
	out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--label", runtime.LabelJob+"="+runID+"-bench", "busybox", "true").CombinedOutput()
	if err != nil {
		b.Fatalf("%v: %s", err, out)
	}
}
