//go:build !nosdk

package llm

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/modelcall/modelcalltest"
)

func reportLatencies(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "calls/s")
}

// BenchmarkGatewayCall: one non-streamed call at a time, directly to a local
// upstream (baseline) or through the gateway (which parses, rewrites,
// forwards, meters and records it).
func BenchmarkGatewayCall(b *testing.B) {
	benchPlainCalls(b, "/chat/completions", `{"model":"x","messages":[{"role":"user","content":"hello there, a short prompt"}]}`)
}

func benchPlainCalls(b *testing.B, path, body string) {
	targets := benchTargets(b, path)
	for _, name := range []string{"baseline", "gateway", "recorded"} {
		b.Run(name, func(b *testing.B) { callLoop(b, targets[name][0], targets[name][1], body) })
	}
}

// BenchmarkGatewayResponsesCall: BenchmarkGatewayCall for a non-streamed
// call of the Responses API.
func BenchmarkGatewayResponsesCall(b *testing.B) {
	benchPlainCalls(b, "/responses", `{"model":"x","instructions":"be brief","input":"hello there, a short prompt"}`)
}

// callLoop posts body to url, one call at a time, and reports the
// latencies.
func callLoop(b *testing.B, url, key, body string) {
	client := &http.Client{}
	lat := make([]time.Duration, 0, b.N)
	start := time.Now()
	for b.Loop() {
		t0 := time.Now()
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		lat = append(lat, time.Since(t0))
	}
	reportLatencies(b, lat, time.Since(start))
}

// BenchmarkGatewayStreamFirstChunk: time from sending a streamed call to
// reading its first event, directly or through the gateway.
func BenchmarkGatewayStreamFirstChunk(b *testing.B) {
	targets := benchTargets(b, "/chat/completions")
	body := `{"model":"x","stream":true,"messages":[{"role":"user","content":"stream please"}]}`
	for _, name := range []string{"baseline", "gateway"} {
		b.Run(name, func(b *testing.B) {
			url, key := targets[name][0], targets[name][1]
			client := &http.Client{}
			lat := make([]time.Duration, 0, b.N)
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				req, _ := http.NewRequest("POST", url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Accept", "text/event-stream")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				br := bufio.NewReader(resp.Body)
				if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
					b.Fatalf("first line %q: %v", line, err)
				}
				lat = append(lat, time.Since(t0))
				io.Copy(io.Discard, br)
				resp.Body.Close()
			}
			reportLatencies(b, lat, time.Since(start))
		})
	}
}

func benchReplay(b *testing.B, body string) {
	up := benchUpstream(b)
	g := New(Endpoints{"oa": {Name: "oa", API: modelcall.OpenAI, BaseURL: up.URL + "/v1", APIKeyEnv: "K", Model: "m"}})
	g.Getenv = func(string) string { return "sk-bench" }
	if err := g.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close(context.Background()) })
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`
	rewritten, _, _, err := rewriteBody(modelcall.OpenAI, []byte(body), "m")
	if err != nil {
		b.Fatal(err)
	}
	// Every call of the recording asks the same: the n-th call of the
	// benchmark matches the n-th of the recording.
	calls := make([]modelcall.Call, 200000)
	for i := range calls {
		calls[i] = modelcall.Call{N: int64(i + 1), API: modelcall.OpenAI, Status: 200, Request: rewritten, Answer: []byte(answer)}
	}
	for _, variant := range []string{"baseline", "replayed"} {
		spec := TrialSpec{ID: "t-" + variant, Agents: []AgentSpec{{ID: "a-1", Endpoint: "oa", Log: io.Discard}}, Prices: map[string]manifest.Price{"oa": testPrice}}
		if variant == "replayed" {
			spec.Replay = &Replay{Calls: map[string][]modelcall.Call{"a-1": calls}}
		}
		trial, err := g.OpenTrial(spec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(variant, func(b *testing.B) { callLoop(b, g.URL()+"/v1/chat/completions", trial.Token("a-1").Reveal(), body) })
		if rep := trial.ReplayReport(); rep != nil && len(rep.Divergences) > 0 {
			b.Fatalf("the benchmark's calls diverged: %+v", rep.Divergences[0])
		}
	}
}

// BenchmarkReplayCall: a call answered from a recording (a replay) against
// the same call forwarded to a local upstream (baseline): a replay
// normalises the request and compares it with the recorded one instead.
func BenchmarkReplayCall(b *testing.B) {
	benchReplay(b, `{"model":"x","messages":[{"role":"user","content":"hello there, a short prompt"}]}`)
}

// BenchmarkReplayCallLong: BenchmarkReplayCall for the last request of a
// 200-call conversation (103 KB).
func BenchmarkReplayCallLong(b *testing.B) {
	benchReplay(b, string(modelcalltest.Conversation(200)[199]))
}
