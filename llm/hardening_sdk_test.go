//go:build !nosdk

package llm

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

// Concurrent calls cannot exceed max_calls: each is counted when admitted.
func TestMaxCallsHoldsUnderConcurrency(t *testing.T) {
	one := int64(1)
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa", Budget: manifest.Budget{MaxCalls: &one}})
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		answer(w)
	})
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() { _, errs[i] = f.openai("a-1").Chat.Completions.New(t.Context(), chatParams) })
	}
	wg.Wait()
	refused := 0
	for _, err := range errs {
		if oerr, ok := errors.AsType[*openai.Error](err); ok && oerr.StatusCode == 429 {
			refused++
		}
	}
	if got := f.up.calls.Load(); got != 1 || refused != 4 {
		t.Errorf("the upstream saw %d calls and %d were refused; max_calls is 1", got, refused)
	}
	if e := <-f.trial.Exhausted(); e.Budget != "max_calls" || e.Spent != 1 {
		t.Errorf("exhaustion %+v", e)
	}
}

// An agent whose client asks for gzip (every SDK does) is metered all the
// same: the gateway never forwards Accept-Encoding, so it reads plain JSON.
func TestCompressedAnswersAreMetered(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			answer(w)
			return
		}
		plain := &headerRecorder{header: w.Header()}
		answer(plain)
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write(plain.body.Bytes())
		zw.Close()
	})
	c := openai.NewClient(option.WithBaseURL(f.g.URL()+"/v1/"), option.WithAPIKey(f.trial.Token("a-1").Reveal()), option.WithMaxRetries(0), option.WithHeader("Accept-Encoding", "gzip"))
	resp, err := c.Chat.Completions.New(t.Context(), chatParams)
	if err != nil || resp.Choices[0].Message.Content != "hi" {
		t.Fatalf("%v %+v", err, resp)
	}
	if r := f.records(t, "a-1")[0]; r.InputTokens != 1000 || r.OutputTokens != 200 || r.CostUSD == 0 {
		t.Errorf("record %+v: a gzipped answer went unmetered", r)
	}
}

// What an upstream says back never carries the real key to the agent or
// the records, and a refused key is the host's business.
func TestUpstreamEchoOfTheKeyIsScrubbed(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	for _, status := range []int{401, 400} {
		f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"message":"key %s is no good","type":"invalid_request_error"}}`, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		})
		_, err := f.openai("a-1").Chat.Completions.New(t.Context(), chatParams)
		oerr, ok := errors.AsType[*openai.Error](err)
		if !ok || oerr.StatusCode != status {
			t.Fatalf("%d: %v", status, err)
		}
		if strings.Contains(oerr.RawJSON(), realKey) || strings.Contains(err.Error(), realKey) {
			t.Errorf("%d: the agent was told the real key: %s", status, oerr.RawJSON())
		}
		if status == 401 && !strings.Contains(oerr.Message, "refused troupe's key (401)") {
			t.Errorf("401 message %q", oerr.Message)
		}
	}
	for _, r := range f.records(t, "a-1") {
		if line, _ := json.Marshal(r); bytes.Contains(line, []byte(realKey)) || !strings.Contains(r.Error, secret.Redacted) {
			t.Errorf("record %s", line)
		}
	}
}

// An upstream that cannot be reached is not the agent hanging up.
func TestUnreachableUpstream(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	g := New(Endpoints{"oa": {Name: "oa", API: modelcall.OpenAI, BaseURL: "http://" + addr + "/v1", Model: "m"}})
	if err := g.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	var log bytes.Buffer
	trial, err := g.OpenTrial(TrialSpec{ID: "t", Agents: []AgentSpec{{ID: "a-1", Endpoint: "oa", Log: &log}}, Prices: map[string]manifest.Price{"oa": testPrice}})
	if err != nil {
		t.Fatal(err)
	}
	c := openai.NewClient(option.WithBaseURL(g.URL()+"/v1/"), option.WithAPIKey(trial.Token("a-1").Reveal()), option.WithMaxRetries(0))
	_, err = c.Chat.Completions.New(t.Context(), chatParams)
	if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != 502 {
		t.Fatalf("%v", err)
	}
	trial.Close(context.Background())
	var r modelcall.Record
	json.Unmarshal(log.Bytes(), &r)
	if r.ErrorClass != modelcall.ClassUnreachable || r.Status != 502 {
		t.Errorf("record %+v", r)
	}
}

// A stream that ends with its usage and no [DONE] (some OpenAI-compatible
// servers) is complete; and the agent cannot bill another organisation.
func TestStreamWithoutDoneAndBillingHeaders(t *testing.T) {
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa"})
	var org string
	var mu sync.Mutex
	f.up.answerWith(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		org = r.Header.Get("OpenAI-Organization") + r.Header.Get("OpenAI-Project")
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\n")
	})
	c := openai.NewClient(option.WithBaseURL(f.g.URL()+"/v1/"), option.WithAPIKey(f.trial.Token("a-1").Reveal()), option.WithMaxRetries(0),
		option.WithOrganization("org-other"), option.WithProject("proj-other"))
	s := c.Chat.Completions.NewStreaming(t.Context(), chatParams)
	for s.Next() {
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if r := f.records(t, "a-1")[0]; r.ErrorClass != "" || r.InputTokens != 7 || r.OutputTokens != 3 {
		t.Errorf("record %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if org != "" {
		t.Errorf("the upstream was asked to bill %q", org)
	}
}
