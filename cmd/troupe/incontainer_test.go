package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/docker"
	"github.com/troupebench/troupe/runtime/runtimetest"
)

// The hidden commands a Kubernetes backend runs in its pods (exec-as,
// link, call pack, copy-self), checked here in Docker containers with
// troupe's static binary, as they run there.

const testImage = "busybox:latest"

// staticTroupe is troupe's static binary, built once for the tests that
// need it.
var staticTroupe = sync.OnceValues(func() (*runtime.Binary, error) {
	return runtimetest.Binary(context.Background(), "../..")
})

// testBox is a started busybox container with troupe's binary at
// runtime.BinaryPath.
type testBox struct {
	rt *docker.Docker
	id string
}

// testDocker opens the Docker backend for a test.
func testDocker(t *testing.T) *docker.Docker {
	t.Helper()
	rt := docker.New("test", nil)
	if err := rt.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	if _, err := rt.Client().ImageInspect(t.Context(), testImage); err != nil {
		t.Fatalf("%s is missing: run bash .ci/seed-images (it builds it offline): %v", testImage, err)
	}
	return rt
}

// testLabels label what a test creates: troupe's owner (the reaper and
// CI's leftover check find it) and troupe.test, the test's name.
func testLabels(t *testing.T, rt *docker.Docker) map[string]string {
	return map[string]string{
		runtime.LabelOwner:   rt.Owner().String(),
		runtime.LabelVersion: "test",
		"troupe.test":        strings.ReplaceAll(t.Name(), "/", "-"),
	}
}

// testNetwork creates a user-defined bridge network, removed when the
// test ends, and returns its name and gateway.
func testNetwork(t *testing.T, rt *docker.Docker) (name, gateway string) {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name = "troupe-test-" + hex.EncodeToString(b)
	resp, err := rt.Client().NetworkCreate(t.Context(), name, network.CreateOptions{Driver: "bridge", Labels: testLabels(t, rt)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Remove(context.Background(), runtime.Resource{Kind: docker.KindNetwork, ID: resp.ID}); err != nil {
			t.Errorf("remove the network: %v", err)
		}
	})
	info, err := rt.Client().NetworkInspect(t.Context(), resp.ID, network.InspectOptions{})
	if err != nil || len(info.IPAM.Config) == 0 || info.IPAM.Config[0].Gateway == "" {
		t.Fatalf("the network's gateway: %+v %v", info.IPAM, err)
	}
	return name, info.IPAM.Config[0].Gateway
}

// startBox starts a container that idles, with the host configuration
// given (capabilities, network; none by default), troupe's binary copied
// in, and removes it when the test ends.
func startBox(t *testing.T, rt *docker.Docker, host container.HostConfig) *testBox {
	t.Helper()
	bin, err := staticTroupe()
	if err != nil {
		t.Fatal(err)
	}
	if host.NetworkMode == "" {
		host.NetworkMode = "none"
	}
	ctx := t.Context()
	created, err := rt.Client().ContainerCreate(ctx, &container.Config{
		Image: testImage, Entrypoint: []string{"sleep", "3600"}, Labels: testLabels(t, rt),
	}, &host, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Remove(context.Background(), runtime.Resource{Kind: runtime.KindContainer, ID: created.ID}); err != nil {
			t.Errorf("remove the container: %v", err)
		}
	})
	if err := rt.Container(created.ID).CopyIn(ctx, []runtime.File{{Path: runtime.BinaryPath, Data: bin.Data, Mode: 0o755}}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Container(created.ID).Start(ctx); err != nil {
		t.Fatal(err)
	}
	return &testBox{rt: rt, id: created.ID}
}

// run runs a command in the box as root and returns its output and exit
// code; err is the backend's classification of 126 and 127, else nil.
func (b *testBox) run(t *testing.T, cmd ...string) (stdout, stderr string, code int, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	p, err := b.rt.Container(b.id).Exec(t.Context(), runtime.ExecSpec{Cmd: cmd, Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	code, err = p.Wait(ctx)
	if code < 0 {
		t.Fatalf("%q: %v", cmd, err)
	}
	return out.String(), errOut.String(), code, err
}

// sh runs a shell script in the box as root; it must succeed.
func (b *testBox) sh(t *testing.T, script string) string {
	t.Helper()
	out, errOut, code, _ := b.run(t, "sh", "-c", script)
	if code != 0 {
		t.Fatalf("sh -c %q: exit %d\n%s%s", script, code, out, errOut)
	}
	return out
}
