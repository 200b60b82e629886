package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
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
	for _, body := range []string{`{"stream":true,"stream_options":null,"messages":[]}`, `{"stream":true,"stream_options":"x","messages":[]}`, `[1]`} {
		req, _ := http.NewRequest(http.MethodPost, f.g.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.trial.Token("a-1").Reveal())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := map[bool]int{true: 400, false: 200}[body == `[1]`]; resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", body, resp.StatusCode, want)
		}
	}
	recs := f.records(t, "a-1")
	if len(recs) != 3 || recs[0].InputTokens != 5 || recs[2].Status != 400 || recs[2].ErrorClass != ClassBadRequest {
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
			if r := recs[0]; r.InputTokens != 1000 || r.OutputTokens != 200 || r.ErrorClass != ClassDisconnect {
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
