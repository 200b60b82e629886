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
)

// pipePair joins the two ends of a tunnel the way an exec's stdin and
// stdout do: two OS pipes.
func pipePair(t *testing.T) (container, host io.ReadWriteCloser) {
	t.Helper()
	r1, w1, _ := os.Pipe()
	r2, w2, _ := os.Pipe()
	return Stdio{In: r1, Out: w2}, Stdio{In: r2, Out: w1}
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
		cerr = Container(ctx, in, []Listen{{Addr: addr, Name: "web"}, {Addr: freeAddr(t), Name: "nowhere"}})
	})
	wg.Go(func() {
		herr = Host(ctx, out, func(ctx context.Context, name string) (net.Conn, error) {
			if name != "web" {
				return nil, fmt.Errorf("no %s", name)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", web.Listener.Addr().String())
		}, ready)
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
