package execstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHead(t *testing.T) {
	for _, c := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"nothing", nil, ""},
		{"short", []string{"exec: not found"}, "exec: not found"},
		{"two writes", []string{"a", "b"}, "ab"},
		{"cut at 512", []string{strings.Repeat("x", 500), strings.Repeat("y", 100)}, strings.Repeat("x", 500) + strings.Repeat("y", 12)},
		{"full before", []string{strings.Repeat("x", 512), "late"}, strings.Repeat("x", 512)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h Head
			for _, w := range c.writes {
				if n, err := h.Write([]byte(w)); n != len(w) || err != nil {
					t.Errorf("Write(%d bytes) = %d, %v: a head takes everything", len(w), n, err)
				}
			}
			if got := h.String(); got != c.want {
				t.Errorf("kept %q, want %q", got, c.want)
			}
		})
	}
}

// stream is a fake exec: it writes its output, then waits for its end or
// for stop, and returns code and err.
type stream struct {
	out, errOut string
	end         chan struct{}
	stopped     chan struct{}
	stopOnce    sync.Once
	code        int
	err         error
}

func newStream(out, errOut string, code int, err error) *stream {
	return &stream{out: out, errOut: errOut, end: make(chan struct{}), stopped: make(chan struct{}), code: code, err: err}
}

func (s *stream) follow(stdout, stderr io.Writer) (int, error) {
	io.WriteString(stdout, s.out)
	io.WriteString(stderr, s.errOut)
	select {
	case <-s.end:
		return s.code, s.err
	case <-s.stopped:
		return -1, ErrDetached
	}
}

func (s *stream) stop() { s.stopOnce.Do(func() { close(s.stopped) }) }

func TestProcess(t *testing.T) {
	failed := errors.New("the command was not found")
	for _, c := range []struct {
		name         string
		code         int
		err          error
		closeFirst   bool
		wantCode     int
		wantErr      error
		wantDetached bool
	}{
		{"exit 0", 0, nil, false, 0, nil, false},
		{"exit 3", 3, nil, false, 3, nil, false},
		{"not found", 127, failed, false, 127, failed, false},
		{"closed before its end", 0, nil, true, -1, ErrDetached, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStream("out", "err", c.code, c.err)
			var stdout, stderr bytes.Buffer
			p := New(nil)
			p.Follow(&stdout, &stderr, s.follow, s.stop)
			if c.closeFirst {
				p.Close()
			} else {
				close(s.end)
			}
			select {
			case <-p.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("Done was not closed")
			}
			code, err := p.Wait(t.Context())
			if code != c.wantCode || !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Errorf("Wait = %d, %v; want %d, %v", code, err, c.wantCode, c.wantErr)
			}
			if p.Detached() != c.wantDetached {
				t.Errorf("Detached = %v, want %v", p.Detached(), c.wantDetached)
			}
			for range 2 {
				if err := p.Close(); err != nil {
					t.Errorf("Close again: %v", err)
				}
			}
			if stdout.String() != "out" || stderr.String() != "err" || p.Output() != "outerr" {
				t.Errorf("stdout %q, stderr %q, output %q", stdout.String(), stderr.String(), p.Output())
			}
			if p.Stdin() != nil {
				t.Error("a process made without standard input has one")
			}
		})
	}
}

// TestWaitEndsWithItsContext: a process still running does not hold a
// Wait whose context ends; nil writers discard.
func TestWaitEndsWithItsContext(t *testing.T) {
	s := newStream("out", "", 0, nil)
	r, w := io.Pipe()
	p := New(w)
	p.Follow(nil, nil, s.follow, s.stop)
	defer p.Close()
	defer r.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if code, err := p.Wait(ctx); code != -1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait = %d, %v; want -1 and the deadline", code, err)
	}
	if p.Stdin() != w {
		t.Error("Stdin is not the writer given")
	}
	select {
	case <-p.Done():
		t.Error("Done before the stream ended")
	default:
	}
}
