package tunnel

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// holdServer accepts connections and, for each, runs serve; it closes them
// all when the test ends. It returns its address and a channel that receives
// the end of each connection's read side (what the tunnel did to it).
func holdServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// tunnelTo runs both ends of a tunnel over pipes, the container end
// listening on one address for target "llm" that the host end dials at
// addr. It returns the in-container address, the host end's counters and a
// function that ends both ends and says how long the host end took to.
func tunnelTo(t *testing.T, addr string, opts Options) (string, func() Stats, func() time.Duration) {
	t.Helper()
	in, out := pipePair(t)
	listen := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan struct{})
	h := newHost(func(ctx context.Context, name string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}, opts)
	var wg sync.WaitGroup
	hostDone := make(chan struct{})
	wg.Go(func() {
		Container(ctx, in, []Listen{{Addr: listen, Name: "llm"}, {Addr: freeAddr(t), Name: "elsewhere"}}, nil)
	})
	wg.Go(func() {
		defer close(hostDone)
		sess, err := yamux.Server(out, config())
		if err != nil {
			t.Error(err)
			return
		}
		h.serve(ctx, sess, ready)
	})
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("never ready")
	}
	var once sync.Once
	var took time.Duration
	end := func() time.Duration {
		once.Do(func() {
			start := time.Now()
			cancel()
			select {
			case <-hostDone:
				took = time.Since(start)
			case <-time.After(20 * time.Second):
				took = 20 * time.Second
			}
		})
		return took
	}
	t.Cleanup(func() { end(); wg.Wait() })
	return listen, h.snapshot, end
}

// echo answers what it reads.
func echo(c net.Conn) { io.Copy(c, c); c.Close() }

// dialEcho connects through the tunnel and says whether the connection
// reached the target (a byte echoed) or was closed.
func dialEcho(t *testing.T, addr string) (net.Conn, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Write([]byte("x"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 1)
	_, err = io.ReadFull(c, b)
	c.SetReadDeadline(time.Time{})
	return c, err == nil
}

func TestStreamsAreBoundedPerTarget(t *testing.T) {
	addr := holdServer(t, echo)
	listen, stats, _ := tunnelTo(t, addr, Options{Limits: map[string]Limit{"llm": {Streams: 3}}})
	var held []net.Conn
	refused := 0
	for range 6 {
		c, ok := dialEcho(t, listen)
		if ok {
			held = append(held, c)
		} else {
			refused++
		}
	}
	if len(held) != 3 || refused != 3 {
		t.Fatalf("%d connections reached the target and %d were refused; the limit is 3", len(held), refused)
	}
	st := stats().Streams["llm"]
	if st.Opened != 3 || st.Refused != 3 || st.Peak != 3 {
		t.Errorf("stats %+v", st)
	}
	// A slot freed is a slot to take.
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := dialEcho(t, listen); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's slot was never given back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSilentStreamsEnd(t *testing.T) {
	tests := []struct {
		name  string
		serve func(net.Conn)
		opts  Options
		want  func(StreamStats) bool
	}{
		{
			// The target and the client both say nothing.
			name:  "idle",
			serve: func(c net.Conn) { io.Copy(io.Discard, c) },
			opts:  Options{Limits: map[string]Limit{"llm": {Streams: 8, Idle: 300 * time.Millisecond}}},
			want:  func(st StreamStats) bool { return st.Idle == 1 },
		},
		{
			// The target answers and half-closes; the client never closes
			// its side.
			name: "half-open",
			serve: func(c net.Conn) {
				c.Write([]byte("bye"))
				c.(*net.TCPConn).CloseWrite()
				io.Copy(io.Discard, c)
			},
			opts: Options{HalfOpen: 300 * time.Millisecond},
			want: func(st StreamStats) bool { return st.HalfOpen == 1 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closed := make(chan time.Time, 1)
			addr := holdServer(t, func(c net.Conn) {
				tt.serve(c)
				closed <- time.Now()
			})
			listen, stats, _ := tunnelTo(t, addr, tt.opts)
			c, err := net.Dial("tcp", listen)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			select {
			case at := <-closed:
				if d := at.Sub(start); d < 250*time.Millisecond {
					t.Errorf("closed after %s, before its limit", d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the target's connection is still open")
			}
			deadline := time.Now().Add(5 * time.Second)
			for !tt.want(stats().Streams["llm"]) {
				if time.Now().After(deadline) {
					t.Fatalf("stats %+v", stats().Streams["llm"])
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestUnnamedStreamsEnd: a container end that opens streams and never names
// their target has them closed after Header.
func TestUnnamedStreamsEnd(t *testing.T) {
	in, out := pipePair(t)
	h := newHost(func(ctx context.Context, name string) (net.Conn, error) { return nil, io.EOF }, Options{Header: 200 * time.Millisecond})
	sess, err := yamux.Server(out, config())
	if err != nil {
		t.Fatal(err)
	}
	client, err := yamux.Client(in, config())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wg.Go(func() { h.serve(ctx, sess, make(chan struct{})) })
	s, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("no newline yet"))
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a stream that never named its target: %v, want it closed", err)
	}
	if st := h.snapshot(); st.Unnamed != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestHostEndsWhateverIsOpen: the host end returns at once when its context
// ends, with a hundred streams open to a target that never closes them and
// from clients that never close theirs.
func TestHostEndsWhateverIsOpen(t *testing.T) {
	addr := holdServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	listen, stats, end := tunnelTo(t, addr, Options{})
	// In batches below maxUnnamed: on a loaded machine a hundred streams
	// opened at once can outrun the reads of their names, and the host
	// rightly refuses the ones past the bound.
	const batch = maxUnnamed / 2
	for opened := 0; opened < 100; {
		n := min(batch, 100-opened)
		for range n {
			c, err := net.Dial("tcp", listen)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
		}
		opened += n
		deadline := time.Now().Add(10 * time.Second)
		for stats().Streams["llm"].Opened < int64(opened) {
			if time.Now().After(deadline) {
				t.Fatalf("%d dialled, stats %+v", opened, stats())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if took := end(); took > 2*time.Second {
		t.Errorf("the host end took %s to end with streams open", took)
	}
}
