package docker

import (
	"context"
	"io"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/troupebench/troupe/runtime"
)

// BenchmarkContainerLifecycle: one container's whole life.
//   - baseline: the docker command line, docker run --rm --network none busybox true
//   - troupe: Create + Start + Exec(true) + Remove through the Engine API
//   - troupe-with-binary: the same, with troupe's binary copied in and
//     troupe init as PID 1, as a trial does it
func BenchmarkContainerLifecycle(b *testing.B) {
	d := newDocker(b)
	ctx := context.Background()
	labels := map[string]string{runtime.LabelJob: runID, runtime.LabelTrial: "bench"}
	b.Run("baseline", func(b *testing.B) {
		for b.Loop() {
			out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--label", runtime.LabelJob+"="+runID, testImage, "true").CombinedOutput()
			if err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
	life := func(b *testing.B, withBinary bool) {
		for b.Loop() {
			spec := runtime.ContainerSpec{Image: testImage, Entrypoint: []string{"sleep", "60"}, Labels: labels}
			if withBinary {
				spec.Entrypoint = []string{runtime.BinaryPath, "init"}
			}
			c, err := d.Create(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			id := c.ID()
			if withBinary {
				if err := d.Container(id).CopyIn(ctx, []runtime.File{{Path: runtime.BinaryPath, Data: testBinary.Data, Mode: 0o755}}); err != nil {
					b.Fatal(err)
				}
			}
			if err := d.Container(id).Start(ctx); err != nil {
				b.Fatal(err)
			}
			p, err := d.Container(id).Exec(ctx, runtime.ExecSpec{Cmd: []string{"true"}})
			if err != nil {
				b.Fatal(err)
			}
			if code, err := p.Wait(ctx); code != 0 || err != nil {
				b.Fatalf("exec true: %d %v", code, err)
			}
			p.Close()
			if err := d.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: id}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("troupe", func(b *testing.B) { life(b, false) })
	b.Run("troupe-with-binary", func(b *testing.B) { life(b, true) })
}

// echoServer echoes every connection back, on loopback.
func echoServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// BenchmarkTunnelRoundTrip: one byte to an echo server on the host and back.
//   - baseline: a loopback TCP connection on the host
//   - tunnel: from nc inside a no-network container, through the tunnel (the
//     byte also crosses nc's own exec streams, as a test harness must)
func BenchmarkTunnelRoundTrip(b *testing.B) {
	addr := echoServer(b)
	one := []byte{'x'}
	buf := make([]byte, 1)
	b.Run("baseline", func(b *testing.B) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		for b.Loop() {
			c.Write(one)
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tunnel", func(b *testing.B) {
		w, r, done := ncThroughTunnel(b, addr)
		defer done()
		for b.Loop() {
			w.Write(one)
			if _, err := io.ReadFull(r, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTunnelThroughput: 8 MiB to a sink on the host, as above.
func BenchmarkTunnelThroughput(b *testing.B) {
	const size = 8 << 20
	chunk := make([]byte, 32<<10)
	sink, counted := countingSink(b)
	send := func(b *testing.B, w io.Writer) {
		for b.Loop() {
			before := counted()
			for sent := 0; sent < size; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					b.Fatal(err)
				}
			}
			for counted()-before < size {
				time.Sleep(100 * time.Microsecond)
			}
		}
		b.SetBytes(size)
	}
	b.Run("baseline", func(b *testing.B) {
		c, err := net.Dial("tcp", sink)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		send(b, c)
	})
	b.Run("tunnel", func(b *testing.B) {
		w, _, done := ncThroughTunnel(b, sink)
		defer done()
		send(b, w)
	})
}

func countingSink(b *testing.B) (string, func() int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	total := make(chan int64, 1)
	total <- 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					t := <-total
					total <- t + int64(n)
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), func() int64 { t := <-total; total <- t; return t }
}

// ncThroughTunnel starts a trial container with a tunnel whose "relay"
// target is addr, and an nc inside connected to it: writes to w travel
// container-ward and out through the tunnel; replies come back on r.
func ncThroughTunnel(b *testing.B, addr string) (io.Writer, io.Reader, func()) {
	d := newDocker(b)
	id := trialContainer(b, d)
	openTunnel(b, d, id, func(ctx context.Context, name string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "tcp", addr)
	})
	pr, pw := io.Pipe()
	p, err := d.Container(id).Exec(context.Background(), runtime.ExecSpec{Cmd: []string{"nc", "127.0.0.1", "3600"}, Stdin: true, Stdout: pw})
	if err != nil {
		b.Fatal(err)
	}
	return p.Stdin(), pr, func() {
		p.Stdin().Close()
		pw.Close()
		p.Close()
	}
}

// BenchmarkHostFence: what the host fence costs, once per troupe process,
// and what the system files check costs, once per trial.
//   - baseline: docker run --rm --network none busybox true
//   - fence: installing the fence through its helper container (host
//     network, NET_ADMIN), as the first networked trial of a process does
//   - diff: the engine's diff of a trial-like container against its image
//     (step 9), beside an inspect of it (inspect)
func BenchmarkHostFence(b *testing.B) {
	d := newDocker(b)
	ctx := context.Background()
	b.Run("baseline", func(b *testing.B) {
		for b.Loop() {
			out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--label", runtime.LabelJob+"="+runID, testImage, "true").CombinedOutput()
			if err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
	b.Run("fence", func(b *testing.B) {
		for b.Loop() {
			if err := d.installFence(ctx, testImage, testBinary); err != nil {
				b.Fatal(err)
			}
		}
	})
	c, err := d.Create(ctx, runtime.ContainerSpec{Image: testImage, Entrypoint: []string{"sh", "-c", "mkdir -p /app && echo x > /app/a && sleep 600"},
		Labels: map[string]string{runtime.LabelJob: runID, runtime.LabelTrial: "bench-diff"}})
	if err != nil {
		b.Fatal(err)
	}
	id := c.ID()
	b.Cleanup(func() { d.Remove(context.Background(), runtime.Resource{Kind: runtime.KindContainer, ID: id}) })
	if err := d.Container(id).Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("inspect", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.cli.ContainerInspect(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("diff", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.Container(id).Changes(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
