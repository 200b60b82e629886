// Package tunnel carries TCP connections between a trial container and the
// host over one byte stream, the standard input and output of an exec, so
// that a container with no network reaches exactly the relay and the LLM
// gateway, on a local or a remote Docker host alike.
//
// Inside the container, Listen accepts connections on loopback addresses
// (127.0.0.1:3600 for the relay, 127.0.0.1:3601 for the gateway) and opens a
// stream for each, named after its target; on the host, Serve accepts the
// streams and dials the target registered under that name. The streams are
// multiplexed with hashicorp/yamux. Once every listener is bound, the
// container end opens a stream named "_ready", so the host learns, as an
// event, that agents may start.
package tunnel

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// readyName is the stream the container end opens when it listens.
const readyName = "_ready"

// Listen binds one in-container address to a host target.
type Listen struct {
	Addr string // e.g. 127.0.0.1:3600
	Name string // e.g. relay
}

// ParseListen reads "ADDR=NAME", the form of troupe tunnel's --listen flag.
func ParseListen(s string) (Listen, error) {
	addr, name, ok := strings.Cut(s, "=")
	if !ok || addr == "" || name == "" || strings.ContainsAny(name, "\n ") {
		return Listen{}, fmt.Errorf("--listen %q is not ADDR=NAME, such as 127.0.0.1:3600=relay", s)
	}
	return Listen{Addr: addr, Name: name}, nil
}

func config() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.ConnectionWriteTimeout = 30 * time.Second
	// A stream one side closed and the other never does is reset after
	// this, rather than the default 5 minutes.
	cfg.StreamCloseTimeout = 30 * time.Second
	return cfg
}

// Handler serves one of the host's calls inside the container (Tunnel.Call):
// arg is the call's argument line, in the bytes the host sent after it, and
// what it writes to out goes back. Calls let the host prepare the container
// and sweep it without starting another exec.
type Handler func(ctx context.Context, arg string, in io.Reader, out io.Writer) error

// Container runs the container end over conn (the exec's stdin and stdout)
// until the host goes away or ctx ends, serving the host's calls with
// handlers; every goroutine it starts has ended when it returns.
func Container(ctx context.Context, conn io.ReadWriteCloser, listens []Listen, handlers map[string]Handler) error {
	sess, err := yamux.Client(conn, config())
	if err != nil {
		return fmt.Errorf("tunnel: %w", err)
	}
	// Calls in progress end with the session.
	ctx, cancel := context.WithCancel(ctx)
	var lns []net.Listener
	var wg sync.WaitGroup
	defer func() {
		cancel()
		sess.Close() // ends every stream, and so every splice
		for _, ln := range lns {
			ln.Close() // ends every accept loop
		}
		wg.Wait()
	}()
	var lc net.ListenConfig
	for _, l := range listens {
		ln, err := lc.Listen(ctx, "tcp", l.Addr)
		if err != nil {
			return fmt.Errorf("tunnel: listen on %s for %s: %w", l.Addr, l.Name, err)
		}
		lns = append(lns, ln)
	}
	for i, ln := range lns {
		name := listens[i].Name
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				wg.Go(func() { forward(ctx, sess, c, name) })
			}
		})
	}
	wg.Go(func() {
		for {
			s, err := sess.AcceptStream()
			if err != nil {
				return // the session ended
			}
			wg.Go(func() { serveCall(ctx, s, handlers) })
		}
	})
	ready, err := sess.Open()
	if err != nil {
		return fmt.Errorf("tunnel: tell the host it is ready: %w", err)
	}
	fmt.Fprintf(ready, "%s\n", readyName)
	ready.Close()
	select {
	case <-sess.CloseChan():
	case <-ctx.Done():
	}
	return nil
}

// serveCall runs the handler a call names and answers "ok\n" and its
// output, or "error <message>\n".
func serveCall(ctx context.Context, s *yamux.Stream, handlers map[string]Handler) {
	defer s.Close()
	br := bufio.NewReader(s)
	line, err := br.ReadString('\n')
	if err != nil {
		return
	}
	name, arg, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	var out bytes.Buffer
	h, ok := handlers[name]
	if !ok {
		err = fmt.Errorf("no call %q here", name)
	} else {
		err = h(ctx, arg, br, &out)
	}
	if err != nil {
		fmt.Fprintf(s, "error %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	io.WriteString(s, "ok\n")
	s.Write(out.Bytes())
}

// forward opens a stream for one accepted connection and splices the two.
// The host end bounds the streams; this end only stops waiting on a
// half-closed one.
func forward(ctx context.Context, sess *yamux.Session, c net.Conn, name string) {
	defer c.Close()
	s, err := sess.OpenStream()
	if err != nil {
		return
	}
	defer s.Close()
	if _, err := fmt.Fprintf(s, "%s\n", name); err != nil {
		return
	}
	splice(ctx, c, s, s, 0, DefaultOptions().HalfOpen)
}

// Dialer reaches a named target on the host.
type Dialer func(ctx context.Context, name string) (net.Conn, error)

// Host serves the host end over conn until the container end goes away or
// ctx ends, within opts' bounds. ready is closed when the container end
// listens. Every goroutine it starts has ended when it returns.
func Host(ctx context.Context, conn io.ReadWriteCloser, dial Dialer, ready chan<- struct{}, opts Options) error {
	sess, err := yamux.Server(conn, config())
	if err != nil {
		return fmt.Errorf("tunnel: %w", err)
	}
	return newHost(dial, opts).serve(ctx, sess, ready)
}

// serve accepts the container end's streams until the session ends. When
// it ends, every stream's splice ends too, whatever the container end or the
// targets left open.
func (h *host) serve(ctx context.Context, sess *yamux.Session, ready chan<- struct{}) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	defer sess.Close()
	wg.Go(func() {
		select {
		case <-ctx.Done():
			sess.Close()
		case <-sess.CloseChan():
			cancel()
		}
	})
	readyOnce := sync.OnceFunc(func() { close(ready) })
	for {
		s, err := sess.AcceptStream()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, yamux.ErrSessionShutdown) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("tunnel: %w", err)
		}
		wg.Go(func() { h.serveStream(ctx, s, readyOnce) })
	}
}

// serveStream reads the target a stream names, admits it within its
// target's limit and splices it to the target.
func (h *host) serveStream(ctx context.Context, s *yamux.Stream, ready func()) {
	defer s.Close()
	if !h.enterUnnamed() {
		return
	}
	s.SetReadDeadline(time.Now().Add(h.opts.Header))
	br := bufio.NewReaderSize(s, 256)
	line, err := br.ReadSlice('\n') // a name longer than the buffer is refused
	h.leaveUnnamed(err == nil)
	if err != nil {
		return
	}
	s.SetReadDeadline(time.Time{})
	name := strings.TrimSuffix(string(line), "\n")
	if name == readyName {
		ready()
		return
	}
	key, lim := h.limit(name)
	if !h.admit(key, lim) {
		return // the in-container client sees its connection closed
	}
	defer h.release(key)
	target, err := h.dial(ctx, name)
	if err != nil {
		h.count(key, func(st *StreamStats) { st.DialFailed++ })
		return // the in-container client sees its connection closed
	}
	defer target.Close()
	switch splice(ctx, target, s, br, lim.Idle, h.opts.HalfOpen) {
	case endedIdle:
		h.count(key, func(st *StreamStats) { st.Idle++ })
		h.opts.Logger.Info("tunnel: closed an idle stream", "target", key, "idle", lim.Idle)
	case endedHalfOpen:
		h.count(key, func(st *StreamStats) { st.HalfOpen++ })
	}
}

// Duplex joins two one-way streams into the one connection a session
// needs: in the container, standard input and output; on the host, the
// exec's output and its input.
type Duplex struct {
	In  io.ReadCloser
	Out io.WriteCloser
}

func (d Duplex) Read(p []byte) (int, error)  { return d.In.Read(p) }
func (d Duplex) Write(p []byte) (int, error) { return d.Out.Write(p) }
func (d Duplex) Close() error                { return errors.Join(d.Out.Close(), d.In.Close()) }
