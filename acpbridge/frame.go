package acpbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/troupebench/troupe/internal/clip"
)

// maxFrame bounds one message from the child: the ACP SDK reads lines of
// at most 10 MiB too.
const maxFrame = 10 << 20

// ProtocolError is a child that broke ACP's framing: a line on its stdout
// that is not a JSON-RPC 2.0 message.
type ProtocolError struct {
	Line string // the start of the offending line
	Err  error
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("the ACP agent broke the protocol: %v: %q", e.Err, e.Line)
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// checkFrame checks one line of the child's stdout: blank, or a JSON-RPC
// 2.0 request, notification or response.
func checkFrame(line []byte) error {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	var msg struct {
		JSONRPC *string          `json:"jsonrpc"`
		ID      *json.RawMessage `json:"id"`
		Method  *string          `json:"method"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		return errors.New("not a JSON object")
	}
	switch {
	case msg.JSONRPC == nil || *msg.JSONRPC != "2.0":
		return errors.New(`not JSON-RPC 2.0 (no "jsonrpc":"2.0")`)
	case msg.Method == nil && msg.ID == nil:
		return errors.New("neither a request, a notification nor a response")
	}
	return nil
}

// frameReader passes the child's stdout on unchanged and checks each line
// as it goes by; the first bad one is reported to onBreak, once.
type frameReader struct {
	r       io.Reader
	onBreak func(*ProtocolError)
	// gate, when set, holds the first read until it is closed: the ACP
	// SDK starts reading in its constructor, before its connection can
	// be configured (SetLogger), and the race detector is right to object.
	gate <-chan struct{}

	mu     sync.Mutex
	line   []byte
	broken bool
}

func (f *frameReader) Read(p []byte) (int, error) {
	if f.gate != nil {
		<-f.gate
	}
	n, err := f.r.Read(p)
	f.scan(p[:n])
	return n, err
}

func (f *frameReader) scan(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(b) > 0 && !f.broken {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			f.line = append(f.line, b...)
			if len(f.line) > maxFrame {
				f.fail(&ProtocolError{Line: clip.Head(string(f.line), 200), Err: fmt.Errorf("a message over %d bytes", maxFrame)})
			}
			return
		}
		f.line = append(f.line, b[:i]...)
		if err := checkFrame(f.line); err != nil {
			f.fail(&ProtocolError{Line: clip.Head(string(f.line), 200), Err: err})
		}
		f.line = f.line[:0]
		b = b[i+1:]
	}
}

// fail runs under mu.
func (f *frameReader) fail(err *ProtocolError) {
	f.broken = true
	f.line = nil
	if f.onBreak != nil {
		f.onBreak(err)
	}
}
