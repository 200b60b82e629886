package llm

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/troupebench/troupe/modelcall"
)

const whenUnitScenario = `scripts:
  a:
    - name: one
      reply: one
    - name: title
      when: {system: '(?i)\btitle\b'}
      repeat: true
      reply: title
    - name: two
      match: {role: tool}
      reply: two
    - name: summary
      when: {system: summar, last_user: '^Summarize'}
      reply: summary
    - name: flaky
      when: {last_user: flaky}
      error: {status: 529, times: 2}
      reply: flaky
    - name: oops
      when: {last_user: '^oops$'}
      repeat: true
      error: {status: 500}
`

// TestWhenChoosesSteps: a call is answered by the first step whose when
// matches it and is not used up, else by the next step in order; a
// repeated step answers every call it matches; a step's errors count per
// step; and side calls never move the order.
func TestWhenChoosesSteps(t *testing.T) {
	sc, err := LoadScenario("when.yaml", []byte(whenUnitScenario))
	if err != nil {
		t.Fatal(err)
	}
	main := modelcall.Prompt{System: "You are a coder.", LastUser: "Create /app/hello.txt", LastRole: "user"}
	tool := modelcall.Prompt{System: "You are a coder.", LastUser: "Create /app/hello.txt", LastRole: "tool"}
	title := modelcall.Prompt{System: "Write a short TITLE for this conversation.", LastUser: "Create /app/hello.txt", LastRole: "user"}
	summary := modelcall.Prompt{System: "You summarize.", LastUser: "Summarize the work", LastRole: "user"}
	halfSummary := modelcall.Prompt{System: "You summarize.", LastUser: "Create /app/hello.txt", LastRole: "user"}
	flaky := modelcall.Prompt{LastUser: "a flaky side call", LastRole: "user"}
	oops := modelcall.Prompt{LastUser: "oops", LastRole: "user"}
	for _, tc := range []struct {
		name  string
		calls []modelcall.Prompt
		want  string
	}{
		{"the order alone", []modelcall.Prompt{main, tool, main}, "one two mock_script_exhausted"},
		{"a repeated side call around the order", []modelcall.Prompt{title, main, title, title, tool, title}, "title one title title two title"},
		{"both patterns must match", []modelcall.Prompt{halfSummary, summary}, "one summary"},
		{"a used-up step lets its calls go to the order", []modelcall.Prompt{summary, summary, tool}, "summary one two"},
		{"errors first, then the answer, then used up", []modelcall.Prompt{flaky, flaky, flaky, flaky}, "529 529 flaky one"},
		{"a repeated step of errors alone is used up after them", []modelcall.Prompt{oops, oops}, "500 one"},
		{"the match checks the step the call was given", []modelcall.Prompt{main, main}, "one mock_script_mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := TrialSpec{ID: "t", Agents: []AgentSpec{{ID: "a-1"}}}
			c := sc.cursor(spec, spec.Agents[0])
			var got []string
			for i, p := range tc.calls {
				st, n, err := c.take(p)
				if n != i+1 {
					t.Errorf("call %d numbered %d", i+1, n)
				}
				switch es, ok := errors.AsType[*errScript](err); {
				case ok:
					got = append(got, es.code)
				case err != nil:
					t.Fatal(err)
				case st.Error != nil:
					got = append(got, fmt.Sprint(st.Error.Status))
				default:
					got = append(got, st.Name)
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("got %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// TestWhenExhaustedSaysWhatTheCallAsked: past the end of the order, a
// script with when steps says that none matched, and what the call asked.
func TestWhenExhaustedSaysWhatTheCallAsked(t *testing.T) {
	sc, err := LoadScenario("when.yaml", []byte("scripts:\n  a:\n    - {when: {system: title}, reply: t}\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec := TrialSpec{ID: "t", Agents: []AgentSpec{{ID: "a-1"}}}
	_, _, err = sc.cursor(spec, spec.Agents[0]).take(modelcall.Prompt{System: "You are a coder.", LastUser: "Create it"})
	want := `runs past the end of its 0 steps in order, and no step's when that is not used up matches it (system prompt "You are a coder.", last user message "Create it")`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant it to say %s", err, want)
	}
}

func TestWhenErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"scripts: {a: [{when: {}, reply: x}]}", "when.yaml:1:22: scripts.a[0].when: when needs system or last_user"},
		{"scripts: {a: [{when: {system: '('}, reply: x}]}", "scripts.a[0].when.system: not a regular expression (Go's RE2 syntax): error parsing regexp: missing closing )"},
		{"scripts: {a: [{when: {last_user: 3}, reply: x}]}", "scripts.a[0].when.last_user: must be a string"},
		{"scripts: {a: [{when: {sytem: x}, reply: x}]}", `unknown key "sytem"; did you mean "system"?`},
		{"scripts: {a: [{repeat: true, reply: x}]}", "scripts.a[0].repeat: repeat needs when"},
		{"scripts: {a: [{when: x, reply: x}]}", "scripts.a[0].when: must be a mapping"},
	} {
		_, err := LoadScenario("when.yaml", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %s", tc.doc, err, tc.want)
		}
	}
}

// sideCallScenario is a coder whose harness asks for a session title
// beside its main calls, as crush, codex or claude code may.
const sideCallScenario = `scripts:
  coder:
    - name: title
      when: {system: '(?i)\btitle\b'}
      repeat: true
      reply: Hello file
    - name: write
      match: {role: user, contains: hello.txt}
      tool_calls: [{name: shell, arguments: {command: "echo hi > /app/hello.txt"}}]
    - name: summary
      when: {system: '(?i)summar', last_user: '^Summarize'}
      reply: a summary
    - name: report
      match: {role: tool, contains: hi}
      reply: "written: {{.Last}}"
  racer:
    - {when: {system: '(?i)\btitle\b'}, repeat: true, reply: a title}
    - reply: step 1
    - reply: step 2
    - reply: step 3
    - reply: step 4
    - reply: step 5
    - reply: step 6
`
