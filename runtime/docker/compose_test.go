package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/runtime/runtimetest"
)

// sidecars are a healthy-when-ready store and a web server that starts
// after it, as a compose file would give them.
func sidecars() []runtime.ServiceSpec {
	return []runtime.ServiceSpec{
		{Name: "db", Image: testImage, Cmd: []string{"sh", "-c", "sleep 1; echo db-ready > /www; touch /ready; exec sleep 3600"},
			Healthcheck: &runtime.Healthcheck{Test: []string{"CMD", "test", "-f", "/ready"}, Interval: 200 * time.Millisecond, Retries: 50}},
		{Name: "web", Image: testImage, Cmd: []string{"sh", "-c", "mkdir -p /w && echo hello-from-web > /w/index.html && exec httpd -f -p 8080 -h /w"},
			Env: []string{"ROLE=web"}, DependsOn: []runtime.Dependency{{Service: "db", Condition: runtime.DependHealthy}}},
	}
}

// TestServices: the trial container starts after its services, reaches
// them by name on an internal network, and takes them (and the network)
// with it when removed. With a network of its own it can still be put
// offline without losing them.
func TestServices(t *testing.T) {
	d := newDocker(t)
	ctx := context.Background()
	for _, mode := range []string{runtime.NetworkNone, runtime.NetworkBridge} {
		t.Run(mode, func(t *testing.T) {
			label := map[string]string{runtime.LabelTrial: "services-" + mode}
			start := time.Now()
			id := runtimetest.Started(t, d, cfg(), runtime.ContainerSpec{
				Network: mode, Labels: label, Services: sidecars(),
				DependsOn: []runtime.Dependency{{Service: "web", Condition: runtime.DependStarted}},
			}).ID()
			if time.Since(start) < time.Second {
				t.Errorf("created in %s: it did not wait for db to be healthy", time.Since(start))
			}
			get := func() (string, int) {
				out, code, _ := runtimetest.Exec(t, d.Container(id), runtime.ExecSpec{Cmd: []string{"sh", "-c", "timeout 5 wget -qO- http://web:8080/"}})
				return out, code
			}
			if out, code := get(); code != 0 || strings.TrimSpace(out) != "hello-from-web" {
				dbg, _, _ := runtimetest.Exec(t, d.Container(id), runtime.ExecSpec{Cmd: []string{"sh", "-c", "nslookup web; ip -4 addr; ip route"}})
				t.Errorf("main to web: exit %d %q\n%s", code, out, dbg)
			}
			if mode == runtime.NetworkBridge {
				if err := d.Container(id).SetOnline(ctx, false); err != nil {
					t.Fatal(err)
				}
				if out, code := get(); code != 0 {
					t.Errorf("offline, main to web: exit %d %q", code, out)
				}
			}
			rs, err := d.List(ctx, label)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, r := range rs {
				if r.Kind == KindNetwork {
					info, err := d.cli.NetworkInspect(ctx, r.ID, network.InspectOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if strings.HasSuffix(info.Name, "-svc") != info.Internal {
						t.Errorf("network %s: internal %v", info.Name, info.Internal)
					}
				}
				kinds = append(kinds, r.Kind+":"+r.Labels[LabelService])
			}
			want := 4 // main, db, web, the services' network (the job's network is the job's)
			if len(rs) != want {
				t.Errorf("resources %v, want %d", kinds, want)
			}
			if err := d.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: id}); err != nil {
				t.Fatal(err)
			}
			if rs, _ := d.List(ctx, label); len(rs) != 0 {
				t.Errorf("left after the trial container was removed: %v", rs)
			}
		})
	}
}

// TestServiceFailures: a service that never becomes healthy, or one that
// exits badly before it is needed, fails Create with what it said, and
// Create leaves nothing behind.
func TestServiceFailures(t *testing.T) {
	d := newDocker(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		svc  runtime.ServiceSpec
		dep  string
		want string
	}{
		{"unhealthy", runtime.ServiceSpec{Name: "db", Image: testImage, Cmd: []string{"sleep", "3600"},
			Healthcheck: &runtime.Healthcheck{Test: []string{"CMD-SHELL", "echo not yet; exit 1"}, Interval: 100 * time.Millisecond, Retries: 2}},
			runtime.DependHealthy, "db is unhealthy: its last probe exited 1: not yet"},
		{"no healthcheck", runtime.ServiceSpec{Name: "db", Image: testImage, Cmd: []string{"sleep", "3600"}},
			runtime.DependHealthy, "db has no healthcheck"},
		{"failed job", runtime.ServiceSpec{Name: "db", Image: testImage, Cmd: []string{"sh", "-c", "echo migration failed; exit 3"}},
			runtime.DependCompleted, "db exited 3: migration failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			label := map[string]string{runtime.LabelTrial: "service-failure-" + strings.ReplaceAll(c.name, " ", "-")}
			spec := runtime.ContainerSpec{Image: testImage, Entrypoint: []string{"sleep", "3600"}, Labels: label, Network: runtime.NetworkBridge,
				Services: []runtime.ServiceSpec{c.svc}, DependsOn: []runtime.Dependency{{Service: "db", Condition: c.dep}}, Binary: testBinary}
			for k, v := range cfg().Labels {
				spec.Labels[k] = v
			}
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			ctr, err := d.Create(cctx, spec)
			if err == nil {
				ctr.Remove(ctx)
				t.Fatal("created")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
			if rs, _ := d.List(ctx, label); len(rs) != 0 {
				t.Errorf("left behind: %v", rs)
			}
		})
	}
}

// TestServiceLimitsAndSweep: a sidecar runs with the limits its spec gives
// (Docker set none before) and troupe's binary mounted read-only; troupe
// sweep --service ends what started in it after its baseline (a loop that
// ignores TERM, in a session of its own) and spares its own process.
func TestServiceLimitsAndSweep(t *testing.T) {
	d := newDocker(t)
	ctx := context.Background()
	label := map[string]string{runtime.LabelTrial: "service-limits"}
	id := runtimetest.Started(t, d, cfg(), runtime.ContainerSpec{
		Labels: label, Binary: testBinary, Entrypoint: []string{runtime.BinaryPath, "init"},
		Services: []runtime.ServiceSpec{{Name: "svc", Image: testImage, Cmd: []string{"sleep", "3600"}, CPUs: 0.5, MemoryMB: 64, Pids: 32}},
	}).ID()
	sidecars, err := d.Container(id).Sidecars(ctx)
	if err != nil || len(sidecars) != 1 || sidecars[0].Name != "svc" || !sidecars[0].Running {
		t.Fatalf("sidecars %+v: %v", sidecars, err)
	}
	svc := sidecars[0].ID
	info, err := d.cli.ContainerInspect(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	hc := info.HostConfig
	if hc.PidsLimit == nil || *hc.PidsLimit != 32 || hc.Memory != 64<<20 || hc.NanoCPUs != 5e8 {
		t.Errorf("sidecar limits: pids %v, memory %d, nano-cpus %d; want 32, %d, %d", hc.PidsLimit, hc.Memory, hc.NanoCPUs, 64<<20, int64(5e8))
	}
	if len(hc.Mounts) != 1 || hc.Mounts[0].Target != path.Dir(runtime.BinaryPath) || !hc.Mounts[0].ReadOnly {
		t.Errorf("sidecar mounts %+v: want troupe's binary, read-only", hc.Mounts)
	}

	base, code, err := runtimetest.Exec(t, d.Container(svc), runtime.ExecSpec{Cmd: []string{runtime.BinaryPath, "sweep", "--list"}, User: "0:0"})
	if err != nil || code != 0 {
		t.Fatalf("sweep --list: %d %v %s", code, err, base)
	}
	shell(t, d, svc, `setsid sh -c 'trap "" TERM; while :; do sleep 0.1; done' </dev/null >/dev/null 2>&1 & exit 0`)
	var out, errOut bytes.Buffer
	p, err := d.Container(svc).Exec(ctx, runtime.ExecSpec{Cmd: []string{runtime.BinaryPath, "sweep", "--service", "--grace", "500ms"}, User: "0:0", Stdin: true, Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Stdin().Write([]byte(base))
	p.Stdin().Close()
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("sweep --service: %d %v %s", code, err, errOut.String())
	}
	var rep inside.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report %q: %v", out.String(), err)
	}
	loop := slices.ContainsFunc(rep.Signalled, func(p inside.Proc) bool { return p.Kill && strings.Contains(p.Cmd, "trap") })
	spared := !slices.ContainsFunc(rep.Signalled, func(p inside.Proc) bool { return p.PID == 1 || strings.Contains(p.Cmd, "3600") })
	if !loop || !spared || len(rep.Survivors) != 0 {
		t.Errorf("sweep report %+v: want the loop killed, sleep 3600 spared, no survivor", rep)
	}
	ps, _ := shell(t, d, svc, "ps -o pid,stat,args")
	for line := range strings.Lines(ps) {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] == "PID" || strings.Contains(line, "ps -o") {
			continue
		}
		// A zombie runs nothing: the killed loop stays one, since the
		// service's PID 1 (sleep) reaps no child.
		if f[0] != "1" && !strings.HasPrefix(f[1], "Z") {
			t.Errorf("process left in the sidecar after its sweep: %s", line)
		}
		if strings.HasPrefix(f[1], "T") {
			t.Errorf("process left stopped: %s", line)
		}
	}
	// On the trial container, the service sweep refuses: its sweep is troupe sweep.
	if _, code, _ := runtimetest.Exec(t, d.Container(id), runtime.ExecSpec{Cmd: []string{runtime.BinaryPath, "sweep", "--list"}, User: "0:0"}); code == 0 {
		t.Error("sweep --list ran in the trial container")
	}
}
