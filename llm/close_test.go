package llm

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// stuckScenario has calls that never end by themselves: a hang, and a
// stream that stalls after its first chunk.
const stuckScenario = `description: "calls that never end by themselves, for the tests of closing"
scripts:
  hang:
    - hang: true
  stall:
    - reply: "a stream that stalls after its first chunk"
      chunks: 3
      chunk_delay_ms: 3600000
`

// waitInFlight waits until the trial has a call in flight.
func waitInFlight(t *testing.T, tr *Trial) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tr.mu.Lock()
		n := len(tr.calls)
		tr.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no call in flight")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRequestCutMidSend: an agent swept while it sends its request leaves
// a metering line that says so (RequestArrived false, nothing asked), and
// a whole request's line does not.
func TestRequestCutMidSend(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.g.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":\"x\",\"messages\":[", f.trial.Token("a-1").Reveal())
	time.Sleep(50 * time.Millisecond)
	conn.Close()
	waitRecords(t, f, "a-1", 1)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.g.URL()+"/v1/chat/completions", strings.NewReader(`{"model":"x","max_tokens":7,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+f.trial.Token("a-1").Reveal())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitRecords(t, f, "a-1", 2)
	recs := f.records(t, "a-1")
	if cut := recs[0]; cut.RequestArrived() || cut.ErrorClass != modelcall.ClassDisconnect || cut.Asked != nil {
		t.Errorf("the cut request's record %+v", cut)
	}
	if whole := recs[1]; !whole.RequestArrived() || whole.Asked == nil {
		t.Errorf("the whole request's record %+v", whole)
	}
}
