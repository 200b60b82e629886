package llm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/troupebench/troupe/modelcall"
)

func TestNormalize(t *testing.T) {
	names := strings.NewReplacer("pk-1", "<pk>")
	for _, tc := range []struct{ a, b string }{
		{`{"b":1,"a":"pk-1"}`, `{"a":"pk-1","b":1}`},
		{`{"t":"at 2026-12-01T14:07:40.787686562Z"}`, `{"t":"at 2027-01-02T00:00:00+01:00"}`},
		{`{"t":"Time left: 4m58s."}`, `{"t":"Time left: 1h0m0s."}`},
		{`{"t":"took 0.25s and 300ms"}`, `{"t":"took 12s and 7ms"}`},
	} {
		x, _ := canonical(normalize([]byte(tc.a), names))
		y, _ := canonical(normalize([]byte(tc.b), names))
		if !bytes.Equal(x, y) {
			t.Errorf("%s and %s differ: %s, %s", tc.a, tc.b, x, y)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{`{"a":"count to 5"}`, `{"a":"count to 6"}`},
		{`{"a":"pk-2"}`, `{"a":"pk-3"}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
	} {
		x, _ := canonical(normalize([]byte(tc.a), names))
		y, _ := canonical(normalize([]byte(tc.b), names))
		if bytes.Equal(x, y) {
			t.Errorf("%s and %s are taken for the same", tc.a, tc.b)
		}
	}
}

func TestMaskTimes(t *testing.T) {
	for in, want := range map[string]string{
		"Time left before the deadline: 4m58s.":                  "Time left before the deadline: <duration>.",
		"1h0m0s 300ms 0.25s 1.5µs 12us 7ns 59s":                  "<duration> <duration> <duration> <duration> <duration> <duration> <duration>",
		"at 2026-12-01T14:07:40.787686562Z, ok":                  "at <time>, ok",
		"2027-01-02 00:00:00+01:00 and 2027-01-02T00:00:00+0100": "<time> and <time>",
		"2026-12-01T14:07:40":                                    "<time>",
		"v1.5s3 a5s 5sec 5m 5min 12 x9s s5s 2026-12":             "v1.5s3 a5s 5sec 5m 5min 12 x9s s5s 2026-12",
		"count to 5, then 6; 0x5s; _5s":                          "count to 5, then 6; 0x5s; _5s",
		"(3s)[250ms]\"4m1s\"":                                    "(<duration>)[<duration>]\"<duration>\"",
		"":                                                       "",
	} {
		if got := maskTimes(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// FuzzMaskTimes: masking never panics, is idempotent, and leaves text
// without digits alone.
func FuzzMaskTimes(f *testing.F) {
	for _, s := range []string{"4m58s", "2026-12-01T14:07:40.787686562Z", "1h2m3.5µs", "5m", "2026-12-01 14:07", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := maskTimes(s)
		if again := maskTimes(m); again != m {
			t.Errorf("%q masks to %q, then to %q", s, m, again)
		}
		if !strings.ContainsAny(s, "0123456789") && m != s {
			t.Errorf("%q has no digit but masks to %q", s, m)
		}
	})
}

// TestMockEstimateIgnoresTimes: the mock's input tokens for requests that
// differ only in the time they tell (a harness's "time left") are one
// figure, in every format; other text still counts.
func TestMockEstimateIgnoresTimes(t *testing.T) {
	chat := func(left string) string {
		return `{"messages":[{"role":"system","content":"You are lead-1. Time left before the deadline: ` + left + `. Now: 2026-12-03T12:30:35Z."},{"role":"user","content":"go"}]}`
	}
	responses := func(left string) string {
		return `{"instructions":"Time left: ` + left + `.","input":[{"type":"message","role":"user","content":"go"}]}`
	}
	for _, tc := range []struct {
		name  string
		parse func(string) (modelcall.Prompt, error)
		body  func(string) string
	}{
		{"chat completions", func(b string) (modelcall.Prompt, error) { return modelcall.ReadPrompt(modelcall.OpenAI, []byte(b)) }, chat},
		{"messages", func(b string) (modelcall.Prompt, error) { return modelcall.ReadPrompt(modelcall.Anthropic, []byte(b)) }, chat},
		{"responses", func(b string) (modelcall.Prompt, error) {
			return modelcall.ReadPrompt(modelcall.OpenAIResponses, []byte(b))
		}, responses},
	} {
		var got []int64
		for _, left := range []string{"59s", "1m0s", "4m58.25s", "300ms"} {
			req, err := tc.parse(tc.body(left))
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got = append(got, estimateInput(req))
		}
		for _, n := range got[1:] {
			if n != got[0] {
				t.Errorf("%s: input tokens %v for the same request at other times", tc.name, got)
			}
		}
		longer, _ := tc.parse(tc.body("59s, and some more words of the prompt"))
		if estimateInput(longer) <= got[0] {
			t.Errorf("%s: more text counts %d, not more than %d", tc.name, estimateInput(longer), got[0])
		}
	}
}
