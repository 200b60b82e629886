//go:build !nosdk

package llm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

// recordCalls opens a trial whose agents play scenario (mock/<name>), makes
// two calls per format, and returns each agent's recorded calls.
func recordCalls(t *testing.T, g *Gateway, name string) map[string][]modelcall.Call {
	t.Helper()
	var specs []AgentSpec
	recs := map[string]*syncbuf.Buffer{}
	for _, f := range formats {
		recs[f.name] = &syncbuf.Buffer{}
		specs = append(specs, AgentSpec{ID: f.name, Endpoint: "mock/" + name, Conversation: recs[f.name]})
	}
	trial, err := g.OpenTrial(TrialSpec{ID: "t-" + name, Agents: specs, Prices: map[string]manifest.Price{"mock/" + name: testPrice}})
	if err != nil {
		t.Fatal(err)
	}
	defer trial.Close(context.Background())
	for _, f := range formats {
		for range 2 {
			req, _ := http.NewRequest(http.MethodPost, g.URL()+f.path, strings.NewReader(f.body))
			if f.anthropic {
				req.Header.Set("X-Api-Key", trial.Token(f.name).Reveal())
			} else {
				req.Header.Set("Authorization", "Bearer "+trial.Token(f.name).Reveal())
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d", f.name, resp.StatusCode)
			}
		}
	}
	out := map[string][]modelcall.Call{}
	for _, f := range formats {
		calls, missing, err := modelcall.ReadConversation(bytes.NewReader(recs[f.name].Bytes()))
		if err != nil || missing != 0 || len(calls) != 2 {
			t.Fatalf("%s: %d calls, %d missing, %v", f.name, len(calls), missing, err)
		}
		out[f.name] = calls
	}
	return out
}

// TestScenarioFromRecording: what was recorded in every wire format,
// streamed or not, reads back as the scripted answers; the scenario made
// from it loads, and played again answers the same.
func TestScenarioFromRecording(t *testing.T) {
	f := newFixture(t)
	scenarios := fstest.MapFS{"replay.yaml": {Data: []byte(replayScenario)}}
	f.g.Scenarios = scenarios
	first := recordCalls(t, f.g, "replay")
	describe := func(a modelcall.Answer) string {
		return fmt.Sprintf("text %q tools %v usage %d/%d", a.Text, a.ToolCalls, a.Usage.Input, a.Usage.Output)
	}
	want := []string{
		`text "" tools [{shell map[command:echo {{not a template}} timeout_s:5]}] usage 50/7`,
		`text "all {{done}} here" tools [] usage 80/9`,
	}
	for name, calls := range first {
		for i, c := range calls {
			if got := describe(modelcall.AnswerOf(c)); got != want[i] {
				t.Errorf("%s call %d: %s\nwant %s", name, i+1, got, want[i])
			}
		}
	}
	var out bytes.Buffer
	if err := WriteScenario(&out, "made from a recording", first, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScenario("made.yaml", out.Bytes()); err != nil {
		t.Fatalf("the scenario does not load: %v\n%s", err, out.String())
	}
	scenarios["made.yaml"] = &fstest.MapFile{Data: out.Bytes()}
	again := recordCalls(t, f.g, "made")
	for name, calls := range again {
		for i, c := range calls {
			if got, was := describe(modelcall.AnswerOf(c)), describe(modelcall.AnswerOf(first[name][i])); got != was {
				t.Errorf("%s call %d played again: %s\nrecorded %s", name, i+1, got, was)
			}
		}
	}
}
