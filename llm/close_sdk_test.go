//go:build !nosdk

package llm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// agentCall is one agent's call, made in the background with a raw
// request, so the test decides when the agent hangs up.
type agentCall struct {
	hangUp context.CancelFunc
	first  chan struct{} // a streamed answer's first event has arrived
	ended  chan string   // how the call ended, for the agent
}

func startCall(t *testing.T, f *fixture, agent string, api modelcall.API, stream bool) *agentCall {
	t.Helper()
	ctx, hangUp := context.WithCancel(t.Context())
	t.Cleanup(hangUp)
	a := &agentCall{hangUp: hangUp, first: make(chan struct{}), ended: make(chan string, 1)}
	path := map[modelcall.API]string{modelcall.OpenAI: "/v1/chat/completions", modelcall.OpenAIResponses: "/v1/responses", modelcall.Anthropic: "/v1/messages"}[api]
	// A body every format reads: the Responses API's input, the others' messages.
	body := fmt.Sprintf(`{"model":"x","stream":%t,"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"input":"hi"}`, stream)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.g.URL()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.trial.Token(agent).Reveal())
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			a.ended <- err.Error()
			return
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		if stream && resp.StatusCode == http.StatusOK {
			if _, err := br.ReadString('\n'); err == nil {
				close(a.first)
			}
		}
		rest, err := io.ReadAll(br)
		a.ended <- fmt.Sprintf("status %d, %q, %v", resp.StatusCode, rest, err)
	}()
	return a
}

// TestTrialCloseEndsCallsPromptly: closing a trial waits only for what can
// still bring a usage figure. A mock call, an injected hang, and an upstream
// that has not answered are cancelled at once and recorded; a real stream
// whose usage is still to come is read on until it comes.
func TestTrialCloseEndsCallsPromptly(t *testing.T) {
	// neverAnswers holds the call until the gateway gives up on it. (A
	// server notices a client has gone only once the body is read.)
	neverAnswers := func(gone <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}
	}
	// lateUsage streams the answer's text, then its usage 300 ms after the
	// agent hung up, as a provider does that bills the whole answer.
	lateUsage := func(gone <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"the whole answer\"},\"finish_reason\":\"stop\"}]}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-gone:
			case <-r.Context().Done():
				return
			}
			time.Sleep(300 * time.Millisecond)
			io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":200}}\n\ndata: [DONE]\n\n")
		}
	}
	for _, tc := range []struct {
		name     string
		agent    AgentSpec
		api      modelcall.API
		stream   bool
		fault    *Fault
		upstream func(gone <-chan struct{}) http.HandlerFunc
		// hangUp: the agent hangs up (after the first event of a stream)
		// and the trial closes; otherwise the trial closes on a waiting agent.
		hangUp bool
		// usage: the upstream still reports usage, which Close must wait for.
		usage bool
	}{
		{name: "mock hang, agent waiting", agent: AgentSpec{ID: "a-1", Role: "hang", Endpoint: "mock/stuck"}, api: modelcall.OpenAI},
		{name: "mock hang, agent gone", agent: AgentSpec{ID: "a-1", Role: "hang", Endpoint: "mock/stuck"}, api: modelcall.Anthropic, hangUp: true},
		{name: "mock stream stalled, agent waiting", agent: AgentSpec{ID: "a-1", Role: "stall", Endpoint: "mock/stuck"}, api: modelcall.OpenAI, stream: true},
		{name: "mock stream stalled, agent gone", agent: AgentSpec{ID: "a-1", Role: "stall", Endpoint: "mock/stuck"}, api: modelcall.OpenAI, stream: true, hangUp: true},
		{name: "mock Responses hang, agent waiting", agent: AgentSpec{ID: "a-1", Role: "hang", Endpoint: "mock/stuck"}, api: modelcall.OpenAIResponses},
		{name: "mock Responses stream stalled, agent gone", agent: AgentSpec{ID: "a-1", Role: "stall", Endpoint: "mock/stuck"}, api: modelcall.OpenAIResponses, stream: true, hangUp: true},
		{name: "injected hang, agent waiting", agent: AgentSpec{ID: "a-1", Endpoint: "oa"}, api: modelcall.OpenAI, fault: &Fault{Hang: true}},
		{name: "injected delay, agent gone", agent: AgentSpec{ID: "a-1", Endpoint: "oa"}, api: modelcall.OpenAI, fault: &Fault{Delay: time.Hour}, hangUp: true},
		{name: "upstream never answers, agent waiting", agent: AgentSpec{ID: "a-1", Endpoint: "oa"}, api: modelcall.OpenAI, upstream: neverAnswers},
		{name: "upstream never answers, agent gone", agent: AgentSpec{ID: "a-1", Endpoint: "an"}, api: modelcall.Anthropic, stream: true, upstream: neverAnswers, hangUp: true},
		{name: "usage 300 ms after the agent hung up", agent: AgentSpec{ID: "a-1", Endpoint: "oa"}, api: modelcall.OpenAI, stream: true, upstream: lateUsage, hangUp: true, usage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.agent)
			f.g.DrainGrace = 10 * time.Second // the default, which the old code waited out
			gone := make(chan struct{})
			if tc.upstream != nil {
				f.up.answerWith(tc.upstream(gone))
			}
			if tc.fault != nil {
				f.g.SetFaults(*tc.fault)
			}
			call := startCall(t, f, "a-1", tc.api, tc.stream)
			waitInFlight(t, f.trial)
			if tc.stream && (tc.usage || tc.agent.Endpoint == "mock/stuck") {
				<-call.first
			} else if tc.upstream != nil {
				for f.up.calls.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			start := time.Now()
			if tc.hangUp {
				call.hangUp()
				close(gone)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			err := f.trial.Close(ctx)
			took := time.Since(start)
			t.Logf("Close took %v", took)
			if err != nil {
				t.Errorf("Close: %v", err)
			}
			recs := f.records(t, "a-1")
			if len(recs) != 1 {
				t.Fatalf("Close returned with %d records, want the call in flight recorded", len(recs))
			}
			r := recs[0]
			if tc.usage {
				if took < 250*time.Millisecond || took > 3*time.Second {
					t.Errorf("Close took %v; the usage came 300 ms after the hang-up", took)
				}
				if r.InputTokens != 1000 || r.OutputTokens != 200 {
					t.Errorf("record %+v: the usage reported after the hang-up is lost", r)
				}
				return
			}
			if took > time.Second {
				t.Errorf("Close took %v for a call that can bring no usage figure", took)
			}
			if r.ErrorClass != modelcall.ClassDisconnect {
				t.Errorf("record %+v, want class %s", r, modelcall.ClassDisconnect)
			}
			if !tc.hangUp {
				select {
				case how := <-call.ended:
					t.Logf("the agent's call ended: %s", how)
				case <-time.After(time.Second):
					t.Error("the agent's call is still open after Close")
				}
			}
		})
	}
}

// TestGatewayCloseEndsCallsPromptly: a job interrupted with a call in flight
// on a trial nobody closed (troupe gateway, a crashed trial) stops at once.
func TestGatewayCloseEndsCallsPromptly(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Role: "hang", Endpoint: "mock/stuck"})
	call := startCall(t, f, "a-1", modelcall.OpenAI, false)
	waitInFlight(t, f.trial)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	start := time.Now()
	err := f.g.Close(ctx)
	took := time.Since(start)
	t.Logf("Gateway.Close took %v", took)
	if err != nil || took > time.Second {
		t.Errorf("Gateway.Close took %v: %v", took, err)
	}
	if recs := f.records(t, "a-1"); len(recs) != 1 || recs[0].ErrorClass != modelcall.ClassDisconnect {
		t.Errorf("records %+v", recs)
	}
	select {
	case <-call.ended:
	case <-time.After(time.Second):
		t.Error("the agent's call is still open after Close")
	}
}
