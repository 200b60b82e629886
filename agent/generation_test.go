package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/troupebench/troupe/contract"
)

// TestGenerationOnTheWire: the manifest's effort and output limit go with
// every call, extra's parameters too, none replacing the model, the
// messages or the tools; nothing is sent when nothing is set.
func TestGenerationOnTheWire(t *testing.T) {
	msgs := []message{{Role: "user", Content: text("hi")}}
	for _, c := range []struct {
		gen  contract.Generation
		want string
	}{
		{contract.Generation{}, `{"messages":[{"content":"hi","role":"user"}],"model":"m"}`},
		{contract.Generation{ThinkingEffort: "high", MaxOutputTokens: 900}, `{"max_completion_tokens":900,"messages":[{"content":"hi","role":"user"}],"model":"m","reasoning_effort":"high"}`},
		{contract.Generation{Extra: map[string]any{"temperature": 0.2, "model": "other", "verbosity": "low"}}, `{"messages":[{"content":"hi","role":"user"}],"model":"m","temperature":0.2,"verbosity":"low"}`},
	} {
		c2 := &llmClient{model: "m", gen: c.gen}
		body, err := c2.request(msgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		var v any // canonical key order
		json.Unmarshal(body, &v)
		got, _ := json.Marshal(v)
		if string(got) != c.want {
			t.Errorf("%+v:\n%s\nwant\n%s", c.gen, got, c.want)
		}
	}
}

// TestCompaction: past the threshold the oldest tool results shrink until
// the conversation fits; under it nothing changes.
func TestCompaction(t *testing.T) {
	big := strings.Repeat("x", 8000)
	conv := func() []message {
		return []message{{Role: "system", Content: text("s")}, {Role: "tool", Content: text(big)}, {Role: "tool", Content: text(big)}, {Role: "user", Content: text("go on")}}
	}
	size := func(msgs []message) int {
		n := 0
		for _, m := range msgs {
			n += len(*m.Content)
		}
		return n
	}
	for _, c := range []struct {
		gen       contract.Generation
		compacted bool
	}{
		{contract.Generation{}, false},
		{contract.Generation{CompactAtTokens: 10_000}, false},                         // 16 kB is 4,000 tokens
		{contract.Generation{CompactAtTokens: 3_000}, true},                           // 12 kB
		{contract.Generation{ContextWindowTokens: 4_000, CompactAtPercent: 50}, true}, // 2,000 tokens: 8 kB
		{contract.Generation{ContextWindowTokens: 4_000}, false},                      // no percentage: no threshold
	} {
		msgs := conv()
		did := compact(msgs, c.gen)
		limit := compactAt(c.gen) * 4
		switch {
		case did != c.compacted:
			t.Errorf("%+v: compacted %v", c.gen, did)
		case did && int64(size(msgs)) > limit:
			t.Errorf("%+v: %d bytes after compaction, over %d", c.gen, size(msgs), limit)
		case did && *msgs[2].Content != big && *msgs[1].Content == big:
			t.Errorf("%+v: the newest result was shortened before the oldest", c.gen)
		case !did && size(msgs) != size(conv()):
			t.Errorf("%+v: changed without compacting", c.gen)
		}
	}
}
