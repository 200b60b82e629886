//go:build !nosdk

package llm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupebench/troupe/internal/syncbuf"
)

// TestDebugLogHoldsNoSecret logs the gateway and its trial at debug level,
// in every form a log line takes, while calls with the real key happen
// (plain, streamed, refused by the upstream, echoing the key, abandoned
// mid-stream): neither the real key nor a minted token is in the output.
func TestDebugLogHoldsNoSecret(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"}, AgentSpec{ID: "b-1", Endpoint: "an"})
	f.g.DrainGrace = 100 * time.Millisecond // for the stream the agent abandons
	var jsonOut syncbuf.Buffer
	logs := []*slog.Logger{f.g.Logger, slog.New(slog.NewJSONHandler(&jsonOut, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	logAll := func(msg string) {
		for _, l := range logs {
			l.Debug(msg, "gateway", f.g, "trial", f.trial, "token", f.trial.Token("a-1"))
			l.Debug(fmt.Sprintf("%s: %v %+v %#v %s %d", msg, f.g, f.g, f.g, f.trial, f.trial))
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				logAll("while calls happen")
			}
		}
	})

	f.openai("a-1").Chat.Completions.New(t.Context(), chatParams)
	s := f.openai("a-1").Chat.Completions.NewStreaming(t.Context(), chatParams)
	for s.Next() {
	}
	f.anthropic("b-1").Messages.New(t.Context(), messageParams)
	f.up.status.Store(401)
	f.anthropic("b-1").Messages.New(t.Context(), messageParams)
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"error\":{\"type\":\"x\",\"message\":\"your key %s\"}}\n\n", r.Header.Get("Authorization"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.g.URL()+"/v1/chat/completions", strings.NewReader(`{"stream":true,"messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+f.trial.Token("a-1").Reveal())
	if resp, err := http.DefaultClient.Do(req); err == nil {
		bufio.NewReader(resp.Body).ReadString('\n')
		cancel()
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cancel()
	waitRecords(t, f, "a-1", 3)
	close(stop)
	wg.Wait()
	logAll("after the calls")

	if f.up.calls.Load() < 5 {
		t.Fatalf("the upstream saw %d calls", f.up.calls.Load())
	}
	out := f.logBuf.String() + jsonOut.String()
	if !strings.Contains(out, "while calls happen") {
		t.Fatal("nothing was logged")
	}
	for what, s := range map[string]string{"the real key": realKey, "a-1's token": f.trial.Token("a-1").Reveal(), "b-1's token": f.trial.Token("b-1").Reveal()} {
		if strings.Contains(out, s) {
			i := strings.Index(out, s)
			t.Errorf("the debug log holds %s: …%s…", what, out[max(i-200, 0):i])
		}
	}
}
