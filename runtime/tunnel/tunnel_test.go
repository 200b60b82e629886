package tunnel

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupebench/troupe/runtime"
)

// pipePair joins the two ends of a tunnel the way an exec's stdin and
// stdout do: two OS pipes.
func pipePair(t *testing.T) (container, host io.ReadWriteCloser) {
	t.Helper()
	r1, w1, _ := os.Pipe()
	r2, w2, _ := os.Pipe()
	return Duplex{In: r1, Out: w2}, Duplex{In: r2, Out: w1}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestTunnelEnds(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "host says hi") }))
	defer web.Close()
	in, out := pipePair(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan struct{})
	var wg sync.WaitGroup
	var cerr, herr error
	wg.Go(func() {
		cerr = Container(ctx, in, []Listen{{Addr: addr, Name: "web"}, {Addr: freeAddr(t), Name: "nowhere"}}, nil)
	})
	wg.Go(func() {
		herr = Host(ctx, out, func(ctx context.Context, name string) (net.Conn, error) {
			if name != "web" {
				return nil, fmt.Errorf("no %s", name)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", web.Listener.Addr().String())
		}, ready, Options{})
	})
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("never ready")
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for range 20 {
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "host says hi" {
			t.Fatalf("through the tunnel: %q", body)
		}
	}
	cancel()
	wg.Wait()
	if cerr != nil || herr != nil {
		t.Errorf("ends returned %v, %v", cerr, herr)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("the container end still listens after it ended")
	}
}

func TestParseListen(t *testing.T) {
	if l, err := ParseListen("127.0.0.1:3600=relay"); err != nil || l.Addr != "127.0.0.1:3600" || l.Name != "relay" {
		t.Errorf("%+v %v", l, err)
	}
	for _, bad := range []string{"", "127.0.0.1:3600", "=relay", "a=", "a=b c"} {
		if _, err := ParseListen(bad); err == nil || !strings.Contains(err.Error(), "ADDR=NAME") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// fakeExecer runs the container end in process, over OS pipes, as if an
// exec carried it: enough to test calls without a container.
type fakeExecer struct{ handlers map[string]Handler }

type fakeProc struct {
	stdin  io.WriteCloser
	done   chan struct{}
	cancel context.CancelFunc
}

func (p *fakeProc) Stdin() io.WriteCloser { return p.stdin }
func (p *fakeProc) Done() <-chan struct{} { return p.done }
func (p *fakeProc) Close() error          { p.cancel(); <-p.done; return nil }
func (p *fakeProc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return 0, nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

func (f fakeExecer) Exec(ctx context.Context, spec runtime.ExecSpec) (runtime.Process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &fakeProc{stdin: w, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(p.done)
		Container(ctx, Duplex{In: r, Out: nopCloser{spec.Stdout}}, nil, f.handlers)
		r.Close()
	}()
	return p, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestCalls(t *testing.T) {
	handlers := map[string]Handler{
		"upper": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
			data, err := io.ReadAll(in)
			fmt.Fprintf(out, "%s:%s", arg, strings.ToUpper(string(data)))
			return err
		},
		"fail": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
			return fmt.Errorf("it broke\non two lines")
		},
		"hang": func(ctx context.Context, arg string, in io.Reader, out io.Writer) error {
			<-ctx.Done()
			return ctx.Err()
		},
	}
	tun := New(fakeExecer{handlers}, "troupe", nil, func(ctx context.Context, name string) (net.Conn, error) {
		return nil, fmt.Errorf("no targets")
	}, Options{})
	if err := tun.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer tun.Close(context.Background())
	if err := tun.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("abc", 100_000)
	out, err := tun.Call(t.Context(), "upper", "x y", []byte(big))
	if err != nil || string(out) != "x y:"+strings.ToUpper(big) {
		t.Errorf("upper: %.40q %v", out, err)
	}
	if _, err := tun.Call(t.Context(), "fail", "", nil); err == nil || !strings.Contains(err.Error(), "it broke; on two lines") {
		t.Errorf("fail: %v", err)
	}
	if _, err := tun.Call(t.Context(), "nothing", "", nil); err == nil || !strings.Contains(err.Error(), `no call "nothing"`) {
		t.Errorf("unknown call: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := tun.Call(ctx, "hang", "", nil); err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("a cancelled call: %v after %s", err, time.Since(start))
	}
	if _, err := tun.Call(t.Context(), "bad name", "", nil); err == nil {
		t.Error("a name with a space was sent")
	}
}

// TestLifecycle: New does no I/O and starts nothing: a tunnel never opened
// closes at once; one whose exec cannot start fails Open and leaves nothing
// to close.
func TestLifecycle(t *testing.T) {
	noDial := func(ctx context.Context, name string) (net.Conn, error) { return nil, fmt.Errorf("no targets") }
	if err := New(fakeExecer{}, "troupe", nil, noDial, Options{}).Close(t.Context()); err != nil {
		t.Errorf("closing a tunnel never opened: %v", err)
	}
	tun := New(failingExecer{}, "troupe", []Listen{{Addr: "127.0.0.1:3600", Name: "relay"}}, noDial, Options{})
	if err := tun.Open(t.Context()); err == nil || !strings.Contains(err.Error(), "troupe tunnel --listen 127.0.0.1:3600=relay") {
		t.Errorf("an exec that cannot start: %v", err)
	}
	if err := tun.Close(t.Context()); err != nil {
		t.Errorf("closing a tunnel that failed to open: %v", err)
	}
}

// failingExecer cannot start an exec.
type failingExecer struct{}

func (failingExecer) Exec(ctx context.Context, spec runtime.ExecSpec) (runtime.Process, error) {
	return nil, fmt.Errorf("no such container")
}
