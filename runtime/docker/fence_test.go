package docker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/runtimetest"
)

// TestHostFenced: a service listening on all of the host's addresses is
// reached by no trial container, by any path: not through the job
// network's gateway, docker0 or the host's own interfaces from a bridged
// container; not through the services' internal network's gateway from a
// container without network of its own, nor from its sidecar. Each try
// fails at once (refused, not a timeout), and the host's own connections
// into a container still work.
func TestHostFenced(t *testing.T) {
	d := newDocker(t)
	ctx := context.Background()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprint(w, "host service")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	hostIPs := hostIPv4s(t)
	bridged := runtimetest.Started(t, d, cfg(), runtime.ContainerSpec{Network: runtime.NetworkBridge,
		Labels:     map[string]string{runtime.LabelTrial: "fence-bridge"},
		Entrypoint: []string{"sh", "-c", "mkdir -p /w && echo in > /w/index.html && exec httpd -f -p 8080 -h /w"}}).ID()
	composed := runtimetest.Started(t, d, cfg(), runtime.ContainerSpec{Network: runtime.NetworkNone,
		Labels: map[string]string{runtime.LabelTrial: "fence-services"}, Services: sidecars(),
		DependsOn: []runtime.Dependency{{Service: "web", Condition: runtime.DependStarted}}}).ID()
	sidecar := serviceID(t, d, composed, "web")

	for _, c := range []struct {
		name, id string
	}{{"a bridged trial container", bridged}, {"a trial container on its services' network", composed}, {"a sidecar", sidecar}} {
		targets := append(gateways(t, d, c.id), hostIPs...)
		for _, ip := range targets {
			start := time.Now()
			out, code := shell(t, d, c.id, fmt.Sprintf("timeout 10 wget -qO- http://%s:%d/ 2>&1", ip, port))
			if code == 0 || strings.Contains(out, "host service") {
				t.Errorf("%s reached the host's service at %s: exit %d %q", c.name, ip, code, out)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("%s to %s: refused after %s; the fence answers at once", c.name, ip, took.Round(time.Millisecond))
			}
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the host's service was reached %d times from trial containers", n)
	}
	// The fence lets the host's own connections in (and their answers out).
	info, err := d.cli.ContainerInspect(ctx, bridged)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range info.NetworkSettings.Networks {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + n.IPAddress + ":8080/")
		if err != nil {
			t.Errorf("the host cannot reach a bridged container's server: %v", err)
			continue
		}
		resp.Body.Close()
	}
}

// TestFenceNeedsBinary: without troupe's binary no container gets a
// network: the fence could not be installed.
func TestFenceNeedsBinary(t *testing.T) {
	d := newDocker(t)
	_, err := d.Create(context.Background(), runtime.ContainerSpec{Image: testImage, Network: runtime.NetworkBridge,
		Labels: map[string]string{runtime.LabelJob: runID, runtime.LabelTrial: "fence-no-binary"}})
	if err == nil || !strings.Contains(err.Error(), "host fence") {
		t.Fatalf("created a networked container without the binary for the fence: %v", err)
	}
}

// hostIPv4s are the host's own non-loopback IPv4 addresses (docker0's
// among them).
func hostIPv4s(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	if len(out) == 0 {
		t.Fatal("the host has no IPv4 address but loopback")
	}
	return out
}

// gateways are the gateway addresses of a container's networks: addresses
// of the host.
func gateways(t *testing.T, d *Docker, id string) []string {
	t.Helper()
	info, err := d.cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for name, n := range info.NetworkSettings.Networks {
		if n.Gateway == "" {
			t.Fatalf("network %s has no gateway address to test", name)
		}
		out = append(out, n.Gateway)
	}
	return out
}

func serviceID(t *testing.T, d *Docker, main, service string) string {
	t.Helper()
	info, err := d.cli.ContainerInspect(context.Background(), main)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range strings.Split(info.Config.Labels[labelServices], ",") {
		c, err := d.cli.ContainerInspect(context.Background(), id)
		if err == nil && c.Config.Labels[LabelService] == service {
			return id
		}
	}
	t.Fatalf("no service %s beside %s", service, short(main))
	return ""
}
