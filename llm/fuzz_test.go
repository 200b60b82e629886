package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

func FuzzLoadScenario(f *testing.F) {
	f.Add([]byte(testScenario))
	f.Add([]byte("scripts: {a: [{reply: x, chunks: 2, error: {status: 503}}]}"))
	f.Add([]byte("scripts: {a: [{tool_calls: [{name: t, arguments: {x: [1, '{{.Channel}}', {y: ~}]}}]}]}"))
	f.Add([]byte("scripts: {'*': [{reply: '{{ .Nope }}'}]}"))
	f.Add([]byte("scripts: {a: [{reply: x, usage: {output_tokens: 1, reasoning_tokens: 2}}]}"))
	f.Add([]byte("scripts: {a: [{choose: [{weight: 0.7, steps: [{reply: x}]}, {weight: 0.3, steps: [{choose: [{weight: 1, steps: [{reply: y}]}, {weight: 0, steps: [{hang: true}]}]}]}]}]}"))
	f.Add([]byte(sideCallScenario))
	f.Add([]byte("scripts: {a: [{when: {system: '(?i)title', last_user: '^x$'}, repeat: true, error: {status: 529, times: 2}, reply: t}, {reply: y}]}"))
	f.Add([]byte("scripts: {a: [{when: {system: '(', last_user: 3}, repeat: yes, reply: t}, {repeat: true, reply: y}, {when: {}, reply: z}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := LoadScenario("fuzz.yaml", data)
		if err == nil {
			// Whatever loads plays: each script answers calls of every kind.
			for _, key := range sc.Scripts() {
				a := AgentSpec{ID: key}
				c := sc.cursor(TrialSpec{ID: "t", Agents: []AgentSpec{a}}, a)
				for _, p := range []modelcall.Prompt{{}, {System: "title", LastUser: "x", LastRole: "user"}, {LastRole: "tool", LastText: "x"}} {
					c.take(p)
				}
			}
			return
		}
		if e, ok := errors.AsType[*located.Error](err); ok && e.Line > 0 {
			return
		}
		if list, ok := errors.AsType[located.List](err); ok && len(list) > 0 {
			for _, e := range list {
				if e.Line < 1 {
					t.Fatalf("unlocated error: %v", e)
				}
			}
			return
		}
		t.Fatalf("error is not located: %#v", err)
	})
}

// FuzzGatewayRequest sends arbitrary bodies to every POST route of a gateway
// in front of a mock: it must answer every one with a JSON body or an event
// stream, never panic.
func FuzzGatewayRequest(f *testing.F) {
	routes := []string{"/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/messages/count_tokens"}
	for _, seed := range []string{
		`{"model":"x","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"x","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}]}]}],"max_tokens":5}`,
		`{"stream":true,"stream_options":{"include_usage":false},"messages":[]}`,
		`{"stream":true,"stream_options":null,"messages":[]}`, // crashed the gateway once
		`[]`, `{`, `{"model":1,"messages":"x"}`,
		// The Responses API's
		`{"model":"x","input":"hi"}`,
		`{"model":"x","stream":true,"instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`,
		`{"stream":true,"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c","name":"shell","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}]}`,
		`{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}]}`,
		`{"input":[{"role":"developer","content":"x"},{"type":"reasoning","summary":[]}]}`,
		`{"input":null,"instructions":["x"]}`, `{"input":[]}`, `{"input":{}}`, `{"background":true,"input":"x"}`,
		`{"stream":true,"stream_options":{"include_obfuscation":false},"input":"x"}`,
	} {
		for route := range routes {
			f.Add([]byte(seed), uint8(route))
		}
	}
	g := New(Endpoints{})
	g.Scenarios = fstest.MapFS{"any.yaml": {Data: []byte("scripts:\n  '*':\n" + strings.Repeat("    - reply: ok\n      chunks: 2\n", 50))}}
	if err := g.Open(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { g.Close(context.Background()) })
	trial, err := g.OpenTrial(TrialSpec{ID: "t", Agents: []AgentSpec{{ID: "a-1", Endpoint: "mock/any"}}, Prices: map[string]manifest.Price{"mock/any": {}}})
	if err != nil {
		f.Fatal(err)
	}
	token := trial.Token("a-1").Reveal()
	f.Fuzz(func(t *testing.T, body []byte, route uint8) {
		path := routes[int(route)%len(routes)]
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		out := rec.Body.Bytes()
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			if !strings.Contains(string(out), "data: ") {
				t.Fatalf("an empty stream for %q", body)
			}
			// The mock's scripts never cut a stream: a Responses one ends
			// with its terminal event.
			if path == "/v1/responses" && !strings.Contains(string(out), "event: response.completed\n") {
				t.Fatalf("a Responses stream without response.completed for %q: %q", body, out)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%s: status %d, body not JSON: %q (request %q)", path, rec.Code, out, body)
		}
	})
}
