//go:build !nosdk

package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
)

// session is what an agent of the replay tests asks, as the official SDKs
// send it: its system prompt names the trial's facts and the time, as
// harnesses' prompts do.
type session struct {
	oa *openai.Client
	an *anthropic.Client
}

func newSession(g *Gateway, tr *Trial) session {
	oa := openai.NewClient(option.WithBaseURL(g.URL()+"/v1/"), option.WithAPIKey(tr.Token("a-1").Reveal()), option.WithMaxRetries(0))
	an := anthropic.NewClient(aoption.WithBaseURL(g.URL()+"/"), aoption.WithAPIKey(tr.Token("b-1").Reveal()), aoption.WithMaxRetries(0))
	return session{&oa, &an}
}

// ask makes each agent's calls: a-1 two chat completions (plain, then
// streamed), b-1 two messages (streamed, then plain). It returns the text
// each answer gave, and the first error.
func (s session) ask(ctx context.Context, pubkey, trialID, second string) ([]string, error) {
	system := fmt.Sprintf("You are a-1, pubkey %s, in channel %s. Now: %s. Time left: %s.", pubkey, trialID, time.Now().UTC().Format(time.RFC3339Nano), time.Duration(time.Now().UnixNano()%1e12).Round(time.Second))
	var texts []string
	p := chatParams
	p.Messages = []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage("first")}
	c, err := s.oa.Chat.Completions.New(ctx, p)
	if err != nil {
		return texts, fmt.Errorf("a-1 call 1: %w", err)
	}
	texts = append(texts, c.Choices[0].Message.Content)
	p.Messages = append(p.Messages, openai.AssistantMessage(c.Choices[0].Message.Content), openai.UserMessage(second))
	st := s.oa.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		return texts, fmt.Errorf("a-1 call 2: %w", err)
	}
	texts = append(texts, acc.Choices[0].Message.Content)

	m := messageParams
	m.System = []anthropic.TextBlockParam{{Text: strings.ReplaceAll(system, "a-1", "b-1")}}
	ms := s.an.Messages.NewStreaming(ctx, m)
	var msg anthropic.Message
	for ms.Next() {
		msg.Accumulate(ms.Current())
	}
	if err := ms.Err(); err != nil {
		return texts, fmt.Errorf("b-1 call 1: %w", err)
	}
	texts = append(texts, msg.Content[0].Text)
	m.Messages = append(m.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock(second)))
	got, err := s.an.Messages.New(ctx, m)
	if err != nil {
		return texts, fmt.Errorf("b-1 call 2: %w", err)
	}
	return append(texts, got.Content[0].Text), nil
}

// TestReplay: a trial's calls to a real-format upstream (OpenAI and
// Anthropic, plain and streamed), recorded, then replayed with the
// upstream switched off: the same answers, metered as recorded, for
// nothing; a changed request is the agent's divergence, shown as a diff,
// and the policy says what its calls get from there.
func TestReplay(t *testing.T) {
	recA, recB := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	f := newFixture(t, AgentSpec{ID: "a-1", Endpoint: "oa", Conversation: recA, Pubkey: "pk-recorded-a"}, AgentSpec{ID: "b-1", Endpoint: "an", Conversation: recB, Pubkey: "pk-recorded-b"})
	want, err := newSession(f.g, f.trial).ask(t.Context(), "pk-recorded-a", "t1", "second")
	if err != nil {
		t.Fatal(err)
	}
	upstreamCalls := f.up.calls.Load()
	waitRecords(t, f, "b-1", 2)
	recorded := map[string][]modelcall.Call{}
	for id, buf := range map[string]*syncbuf.Buffer{"a-1": recA, "b-1": recB} {
		calls, missing, err := modelcall.ReadConversation(bytes.NewReader(buf.Bytes()))
		if err != nil || missing != 0 || len(calls) != 2 {
			t.Fatalf("%s: %d calls, %v, %d missing", id, len(calls), err, missing)
		}
		recorded[id] = calls
	}
	same := []Same{{"trial", "t1", "t2"}, {"pubkey of a-1", "pk-recorded-a", "pk-replay-a"}, {"pubkey of b-1", "pk-recorded-b", "pk-replay-b"}}
	replay := func(policy modelcall.DivergencePolicy) *Trial {
		t.Helper()
		tr, err := f.g.OpenTrial(TrialSpec{ID: "t2", Channel: "t2", Prices: map[string]manifest.Price{"oa": testPrice, "an": testPrice},
			Agents: []AgentSpec{{ID: "a-1", Endpoint: "oa", Pubkey: "pk-replay-a"}, {ID: "b-1", Endpoint: "an", Pubkey: "pk-replay-b"}},
			Replay: &Replay{Calls: recorded, Same: same, OnDivergence: policy, PastEndGrace: 50 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close(context.Background()) })
		return tr
	}

	t.Run("live after a divergence", func(t *testing.T) {
		tr := replay(modelcall.DivergeLive)
		got, err := newSession(f.g, tr).ask(t.Context(), "pk-replay-a", "t2", "a different second")
		if err != nil {
			t.Fatal(err)
		}
		// Each agent's first call is replayed, the second goes upstream.
		if n := f.up.calls.Load() - upstreamCalls; n != 2 || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%d upstream calls; answers %q, recorded %q", n, got, want)
		}
		rep := tr.ReplayReport()
		if len(rep.Divergences) != 2 || rep.Reproduced() {
			t.Fatalf("%+v", rep)
		}
		d := rep.Divergences[0]
		if d.Agent != "a-1" || d.Call != 2 || !strings.Contains(d.Diff, "-- content: second") || !strings.Contains(d.Diff, "+- content: a different second") {
			t.Errorf("divergence %+v\n%s", d, d.Diff)
		}
		for _, a := range rep.Agents {
			if a.Replayed != 1 || a.Live != 1 || a.Recorded != 2 || a.LiveCostUSD < wantCost*0.99 {
				t.Errorf("%+v", a)
			}
		}
	})

	f.up.srv.Close()
	t.Run("the upstream off", func(t *testing.T) {
		tr := replay(modelcall.DivergeStop)
		got, err := newSession(f.g, tr).ask(t.Context(), "pk-replay-a", "t2", "second")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("answers %q, recorded %q", got, want)
		}
		// count_tokens is not recorded: a replay estimates it, asking no upstream.
		count, err := newSession(f.g, tr).an.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: "m", Messages: messageParams.Messages})
		if err != nil || count.InputTokens <= 0 {
			t.Errorf("count_tokens: %v %+v", err, count)
		}
		rep := tr.ReplayReport()
		if !rep.Reproduced() || len(rep.Agents) != 2 {
			t.Fatalf("%+v", rep)
		}
		perAgent, total := tr.Usage()
		if total.Calls != 4 || perAgent["a-1"].CostUSD < wantCost*0.99 {
			t.Errorf("the replayed calls are metered as recorded: %+v", perAgent)
		}
		for _, a := range rep.Agents {
			if a.LiveCostUSD != 0 || a.Live != 0 {
				t.Errorf("%+v", a)
			}
		}
	})

	t.Run("stop", func(t *testing.T) {
		tr := replay(modelcall.DivergeStop)
		_, err := newSession(f.g, tr).ask(t.Context(), "pk-replay-a", "t2", "changed")
		if aerr, ok := errors.AsType[*openai.Error](err); !ok || aerr.StatusCode != 400 || !strings.Contains(aerr.RawJSON(), "replay: call 2 of agent a-1 is off its recording") {
			t.Fatalf("%v", err)
		}
		select {
		case d := <-tr.Diverged():
			if d.Agent != "a-1" || d.Call != 2 {
				t.Errorf("%+v", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no divergence reported")
		}
		// The replay stopped there: b-1's first call, its recording's
		// own, is refused uncompared, and no second divergence is told.
		_, err = newSession(f.g, tr).an.Messages.New(t.Context(), messageParams)
		if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || aerr.StatusCode != 400 || !strings.Contains(aerr.RawJSON(), "the replay stopped at call 2 of agent a-1") {
			t.Fatalf("b-1 after the stop: %v", err)
		}
		rep := tr.ReplayReport()
		if len(rep.Divergences) != 1 || rep.Agents[1].ID != "b-1" || rep.Agents[1].Refused != 1 || rep.Agents[1].Replayed != 0 {
			t.Errorf("%+v", rep)
		}
		select {
		case d := <-tr.Diverged():
			t.Errorf("a second divergence told: %+v", d)
		default:
		}
	})

	t.Run("mock-error past the recording", func(t *testing.T) {
		tr := replay(modelcall.DivergeMockError)
		s := newSession(f.g, tr)
		if _, err := s.ask(t.Context(), "pk-replay-a", "t2", "second"); err != nil {
			t.Fatal(err)
		}
		// A third call is past the recording: refused, as is every later one.
		for range 2 {
			_, err := s.oa.Chat.Completions.New(t.Context(), chatParams)
			if aerr, ok := errors.AsType[*openai.Error](err); !ok || aerr.StatusCode != 400 {
				t.Fatalf("%v", err)
			}
		}
		rep := tr.ReplayReport()
		a := rep.Agents[0]
		if len(rep.Divergences) != 1 || rep.Divergences[0].Why != "the recording has 2 calls of this agent: this one is past them" || a.Refused != 2 || a.Replayed != 2 {
			t.Errorf("%+v", rep)
		}
	})
}
