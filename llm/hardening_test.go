package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

// answer is the upstream's usual non-streamed chat completion.
func answer(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":200,"prompt_tokens_details":{"cached_tokens":400}}}`)
}

func (u *upstream) answerWith(h http.HandlerFunc) { u.custom.Store(&h) }

// A malformed request gets a 400 and a record, never a crash.
func TestNullStreamOptions(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		if opts, _ := body["stream_options"].(map[string]any); opts["include_usage"] != true {
			http.Error(w, "no include_usage", 400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
	})
	for _, body := range []string{`{"stream":true,"stream_options":null,"messages":[]}`, `{"stream":true,"stream_options":"x","messages":[]}`, `[1]`, `null`} {
		req, _ := http.NewRequest(http.MethodPost, f.g.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.trial.Token("a-1").Reveal())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := map[bool]int{true: 400, false: 200}[body == `[1]` || body == `null`]; resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", body, resp.StatusCode, want)
		}
	}
	recs := f.records(t, "a-1")
	if len(recs) != 4 || recs[0].InputTokens != 5 || recs[2].Status != 400 || recs[2].ErrorClass != modelcall.ClassBadRequest ||
		recs[3].Status != 400 || recs[3].ErrorClass != modelcall.ClassBadRequest {
		t.Errorf("records %+v", recs)
	}
}

// An agent that hangs up once it has its answer, before the usage event,
// is still metered: the gateway reads on for what the provider bills.
func TestHangingUpBeforeTheUsageIsStillMetered(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	f.g.DrainGrace = 5 * time.Second
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"the whole answer\"},\"finish_reason\":\"stop\"}]}\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(500 * time.Millisecond) // the agent is gone by now
		// The gateway's writes to the agent fail on these.
		for range 30 {
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
		io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":200}}\n\ndata: [DONE]\n\n")
	})
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.g.URL()+"/v1/chat/completions", strings.NewReader(`{"stream":true,"messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+f.trial.Token("a-1").Reveal())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if !strings.Contains(line, "the whole answer") {
		t.Fatalf("first event %q", line)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if recs := f.records(t, "a-1"); len(recs) == 1 {
			if r := recs[0]; r.InputTokens != 1000 || r.OutputTokens != 200 || r.ErrorClass != modelcall.ClassDisconnect {
				t.Errorf("record %+v", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no record of the call")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An agent cannot bill another Anthropic workspace either (the SDK sets
// the header, count_tokens among others).
func TestNoAnthropicWorkspace(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "b-1", Endpoint: "an"})
	var got []string
	var mu sync.Mutex
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+"="+r.Header.Get("Anthropic-Workspace-Id"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/count_tokens") {
			io.WriteString(w, `{"input_tokens":3}`)
			return
		}
		io.WriteString(w, `{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"model":"m","stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
	})
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		req, _ := http.NewRequest(http.MethodPost, f.g.URL()+path, strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("X-Api-Key", f.trial.Token("b-1").Reveal())
		req.Header.Set("Anthropic-Workspace-Id", "wrkspc_other")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != "/v1/messages=" || got[1] != "/v1/messages/count_tokens=" {
		t.Errorf("the upstream saw %v", got)
	}
}

// TestStalledConnectionsEnd: a request whose body stalls is answered 408
// after BodyTimeout, and a kept-alive connection with no next request is
// closed after IdleTimeout; neither stays in the gateway the job's trials
// share.
func TestStalledConnectionsEnd(t *testing.T) {
	up := newUpstream(t)
	g := New(Endpoints{"oa": {Name: "oa", API: modelcall.OpenAI, BaseURL: up.srv.URL + "/v1", APIKeyEnv: "K", Model: "m"}})
	g.Getenv = func(string) string { return realKey }
	g.BodyTimeout, g.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond
	if err := g.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Close(ctx)
	})
	trial, err := g.OpenTrial(TrialSpec{ID: "t1", Channel: "c", UserPubkey: "u", Agents: []AgentSpec{{ID: "a-1", Endpoint: "oa", Log: io.Discard}},
		Prices: map[string]manifest.Price{"oa": testPrice}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trial.Close(context.Background()) })
	addr := strings.TrimPrefix(g.URL(), "http://")
	tests := []struct {
		name, send, want string
	}{
		{"a stalled body", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + trial.Token("a-1").Reveal() +
			"\r\nContent-Length: 1000\r\n\r\n{\"messages\":", "HTTP/1.1 408"},
		{"an idle kept-alive connection", "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + trial.Token("a-1").Reveal() + "\r\n\r\n", "HTTP/1.1 200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tt.send)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			start := time.Now()
			got, err := io.ReadAll(c) // until the gateway closes the connection
			if err != nil {
				t.Fatalf("the connection is still open after %s: %v", time.Since(start), err)
			}
			if !strings.HasPrefix(string(got), tt.want) {
				t.Errorf("answer %.60q, want %s", got, tt.want)
			}
		})
	}
}
