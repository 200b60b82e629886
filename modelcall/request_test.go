package modelcall

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// summary is a request's view in one line: each message's role (and type),
// text and tool calls, then the system prompt and the tools' count.
func summary(r Request) string {
	var b strings.Builder
	if sys := r.System(); sys != nil {
		fmt.Fprintf(&b, "system %q; ", sys.Flat())
	}
	for _, m := range r.Messages() {
		fmt.Fprintf(&b, "%s", m.Role)
		if m.Type != "" {
			fmt.Fprintf(&b, "/%s", m.Type)
		}
		if m.Whole {
			b.WriteString(" whole")
		}
		fmt.Fprintf(&b, " %q", m.Content.Flat())
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, " call %s %s(%s)", tc.ID, tc.Name, tc.Arguments)
		}
		for _, p := range m.Content.Parts {
			switch p.Type {
			case "tool_use":
				fmt.Fprintf(&b, " use %s %s(%s)", p.Call.ID, p.Call.Name, p.Call.Arguments)
			case "tool_result":
				fmt.Fprintf(&b, " result %s", p.CallID)
			}
		}
		if m.CallID != "" {
			fmt.Fprintf(&b, " for %s", m.CallID)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " for %s", m.ToolCallID)
		}
		if m.Name != "" {
			fmt.Fprintf(&b, " %s(%s)", m.Name, m.Arguments)
		}
		if m.Output.Raw != nil {
			fmt.Fprintf(&b, " output %q", m.Output.Flat())
		}
		b.WriteString("; ")
	}
	tools, _ := ParseTools(r.Tools())
	fmt.Fprintf(&b, "%d tools", len(tools))
	return b.String()
}

// TestParseRequest: each format's request reads into the one view: its
// history with roles, texts, tool calls and results, its system prompt
// and its tools.
func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		api  API
		body string
		want string
	}{
		{"chat completions", OpenAI,
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"shell","arguments":"{\"command\":\"ls\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"a b"}],"tools":[{"type":"function","function":{"name":"shell"}}]}`,
			`system "be brief"; user "hi"; assistant "" call c1 shell({"command":"ls"}); tool "a b" for c1; 1 tools`},
		{"messages", Anthropic,
			`{"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"shell","input":{"command":"ls"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a b"}]}]}],"tools":[{"name":"shell","input_schema":{}}]}`,
			`system "be brief"; user "go"; assistant "ok" use t1 shell({"command":"ls"}); user "a b" result t1; 1 tools`},
		{"Responses, text input", OpenAIResponses, `{"instructions":"be brief","input":"hi"}`,
			`system "be brief"; user whole "hi"; 0 tools`},
		{"Responses, items", OpenAIResponses,
			`{"input":[{"role":"developer","content":"env"},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","call_id":"c","name":"shell","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"},{"type":"reasoning","summary":[]}]}`,
			`developer "env"; user/message "hi"; /function_call "" for c shell({}); /function_call_output "" for c output "ok"; /reasoning ""; 0 tools`},
		{"no history", OpenAI, `{"model":"m"}`, `0 tools`},
		{"a history that is no list", Anthropic, `{"messages":"x"}`, `0 tools`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest(tc.api, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(r); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if _, err := ParseRequest(OpenAI, []byte(`[1]`)); err == nil {
		t.Error("a body that is no object reads")
	}
}

// TestMalformedParts: a part or an item of the wrong shape says so, and
// what it says is read all the same.
func TestMalformedParts(t *testing.T) {
	for _, tc := range []struct {
		raw                          string
		malformed, badName, badID    bool
		text, name, callID, contents string
	}{
		{`{"type":"text","text":"x"}`, false, false, false, "x", "", "", ""},
		{`{"type":"text","text":5}`, true, false, false, "", "", "", ""},
		{`{"type":"tool_use","id":7,"name":"shell"}`, false, false, true, "", "shell", "", ""},
		{`{"type":"tool_result","tool_use_id":7,"content":"ok"}`, false, true, false, "", "", "", "ok"},
		{`"a string"`, true, false, false, "", "", "", ""},
		{`null`, false, false, false, "", "", "", ""},
	} {
		c := ParseContent(json.RawMessage("[" + tc.raw + "]"))
		p := c.Parts[0]
		if p.Malformed != tc.malformed || p.BadName != tc.badName || p.BadID != tc.badID || p.Text != tc.text || p.Call.Name != tc.name || p.CallID != tc.callID || p.Content.Flat() != tc.contents {
			t.Errorf("%s: %+v", tc.raw, p)
		}
		if c.Malformed() != tc.malformed || c.BadNames() != (tc.badName || tc.badID) {
			t.Errorf("%s: the content's malformed %v, bad names %v", tc.raw, c.Malformed(), c.BadNames())
		}
	}
	for _, tc := range []struct {
		raw                  string
		malformed, badFields bool
		role                 string
	}{
		{`{"role":"user","content":"x"}`, false, false, "user"},
		{`{"role":5,"content":"x"}`, true, false, ""},
		{`{"role":"assistant","tool_calls":"x"}`, false, true, "assistant"},
		{`"x"`, true, false, ""},
		{`null`, false, false, ""},
	} {
		m := ParseMessage(json.RawMessage(tc.raw))
		if m.Malformed != tc.malformed || m.BadFields != tc.badFields || m.Role != tc.role {
			t.Errorf("%s: %+v", tc.raw, m)
		}
	}
}

// TestReadPrompt: what a scripted model reads: the last message's role
// and text, the system prompt and the last user message, and the input's
// texts; and why a request has no prompt.
func TestReadPrompt(t *testing.T) {
	for _, tc := range []struct {
		api              API
		body             string
		role, text       string
		system, lastUser string
		texts, errors    string
	}{
		{OpenAI, `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`, "user", "hi", "s", "hi", `["" "s" "hi"]`, ""},
		{Anthropic, `{"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"ok"}]}]}]}`, "tool", "ok", "s", "", `["s" "ok"]`, ""},
		{OpenAIResponses, `{"instructions":"s","input":"hi"}`, "user", "hi", "s", "hi", `["s" "hi"]`, ""},
		{OpenAIResponses, `{"input":[{"role":"developer","content":"d"}]}`, "system", "d", "d", "", `["" "d" "" "" ""]`, ""},
		{OpenAIResponses, `{"input":[{"type":"custom_tool_call_output","call_id":"c","output":"done"}]}`, "tool", "done", "", "", `["" "" "done" "" ""]`, ""},
		{OpenAIResponses, `{"input":[{"type":"function_call","name":"shell","arguments":"{}"}]}`, "assistant", "", "", "", `["" "" "" "shell" "{}"]`, ""},
		// The system prompt gathers every system and developer message;
		// the last user message is the user's, not a tool's result.
		{OpenAI, `{"messages":[{"role":"developer","content":"d"},{"role":"user","content":"task"},{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"tool","tool_call_id":"c","content":"out"}]}`,
			"tool", "out", "d\ns", "task", `["" "d" "task" "s" "out"]`, ""},
		{Anthropic, `{"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"x"},{"role":"user","content":[{"type":"text","text":"second"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"},{"type":"text","text":"note"}]}]}`,
			"tool", "r\nnote", "a\nb", "second", `["a\nb" "first" "x" "second" "r\nnote"]`, ""},
		{OpenAIResponses, `{"instructions":"i","input":[{"role":"developer","content":"d"},{"role":"user","content":[{"type":"input_text","text":"task"}]},{"type":"function_call_output","call_id":"c","output":"out"}]}`,
			"tool", "out", "i\nd", "task", `["i" "d" "" "" "" "task" "" "" "" "" "out" "" ""]`, ""},
		{OpenAI, `{"messages":[]}`, "", "", "", "", "[]", "the request has no messages"},
		{OpenAIResponses, `{"input":null}`, "", "", "", "", "[]", "the request has no input"},
		{OpenAIResponses, `{"input":{}}`, "", "", "", "", "[]", "the mock cannot read the request's input, neither text nor a list of items"},
		{OpenAI, `{"messages":"x"}`, "", "", "", "", "[]", "the mock cannot read the request: "},
	} {
		p, err := ReadPrompt(tc.api, []byte(tc.body))
		if tc.errors != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.errors) {
				t.Errorf("%s: %v, want %q", tc.body, err, tc.errors)
			}
			continue
		}
		if err != nil || p.LastRole != tc.role || p.LastText != tc.text || p.System != tc.system || p.LastUser != tc.lastUser || fmt.Sprintf("%q", p.Texts) != tc.texts {
			t.Errorf("%s: %+v %q %v", tc.body, p, p.Texts, err)
		}
	}
}

// TestLastOnly: a request keeps nothing but the last item of its history.
func TestLastOnly(t *testing.T) {
	for in, want := range map[string]string{
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"tools":[]}`: `{"messages":[{"role":"user","content":"b"}]}`,
		`{"input":[{"type":"function_call_output","output":"x"}],"instructions":"i"}`:                       `{"input":[{"type":"function_call_output","output":"x"}]}`,
		`{"input":"text"}`: `{}`,
		`"not an object"`:  `"not an object"`,
	} {
		if got := string(LastOnly(json.RawMessage(in))); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// TestParseTools: each format's tool reads as a function, or as a tool of
// its own kind.
func TestParseTools(t *testing.T) {
	tools, ok := ParseTools(json.RawMessage(`[{"type":"function","function":{"name":"a","parameters":{}}},{"name":"b","description":"d","input_schema":{"type":"object"}},{"type":"function","name":"c","parameters":{}},{"type":"web_search"}]`))
	if !ok || len(tools) != 4 {
		t.Fatalf("%v %+v", ok, tools)
	}
	var got []string
	for _, tl := range tools {
		if f := tl.Function; f != nil {
			got = append(got, fmt.Sprintf("%v %v %v %v", f.Name, f.Description, f.Parameters, f.Wrapped))
		} else {
			got = append(got, fmt.Sprint(tl.Decoded["type"]))
		}
	}
	if want := "[a <nil> map[] true b d map[type:object] false c <nil> map[] false web_search]"; fmt.Sprint(got) != want {
		t.Errorf("%v\nwant %s", got, want)
	}
	if _, ok := ParseTools(json.RawMessage(`[1]`)); ok {
		t.Error("a list of numbers reads as tools")
	}
}

// FuzzParseRequest: any body, in any format, reads into the view (or an
// error), its prompt and its last message, never a panic.
func FuzzParseRequest(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}]}]}]}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"n","arguments":"{}"},{"type":"function_call_output","output":[{"type":"input_text","text":"x"}]}],"instructions":"i"}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"n","arguments":"x"}}]}],"tools":[{"name":"a"}]}`,
		`{"input":"hi"}`, `null`, `[]`, `{"messages":"x","system":5}`,
	} {
		f.Add([]byte(seed), uint8(0))
	}
	apis := []API{OpenAI, Anthropic, OpenAIResponses}
	f.Fuzz(func(t *testing.T, body []byte, n uint8) {
		api := apis[int(n)%len(apis)]
		if r, err := ParseRequest(api, body); err == nil {
			for _, m := range r.Messages() {
				m.Content.Flat()
				m.Output.Flat()
			}
			if sys := r.System(); sys != nil {
				sys.Flat()
			}
			ParseTools(r.Tools())
			r.Asked()
		}
		ReadPrompt(api, body)
		LastOnly(body)
	})
}
