package llm

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

const choiceScenario = `scripts:
  solo:
    - reply: first
    - choose:
        - weight: 7
          steps:
            - reply: pass
            - reply: pass again
        - weight: 3
          steps:
            - reply: fail
    - reply: last
`

// TestScenarioChoice: a choice picks a branch by weight, seeded by the
// trial's name: the same trial chooses alike on every run, and across
// trials a branch is taken as often as its weight says.
func TestScenarioChoice(t *testing.T) {
	sc, err := LoadScenario("c.yaml", []byte(choiceScenario))
	if err != nil {
		t.Fatal(err)
	}
	agent := AgentSpec{ID: "solo-1", Role: "solo"}
	steps := func(name string) string {
		c := sc.cursor(TrialSpec{ID: name + "-" + fmt.Sprint(len(name)), Name: name, Agents: []AgentSpec{agent}}, agent)
		var replies []string
		for _, st := range c.steps {
			replies = append(replies, st.Reply.Root.String())
		}
		return strings.Join(replies, ",")
	}
	const n = 4000
	passed := 0
	for i := range n {
		name := fmt.Sprintf("hello__cond__%d", i)
		got := steps(name)
		switch got {
		case "first,pass,pass again,last":
			passed++
		case "first,fail,last":
		default:
			t.Fatalf("%s: %s", name, got)
		}
		if again := steps(name); again != got {
			t.Fatalf("%s chose %s, then %s", name, got, again)
		}
	}
	// 0.7 within four standard errors.
	if rate, se := float64(passed)/n, math.Sqrt(0.7*0.3/n); math.Abs(rate-0.7) > 4*se {
		t.Errorf("the 0.7 branch was taken %.3f of the time", rate)
	}
}

func TestScenarioChoiceErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"scripts: {a: [{choose: [{weight: 1, steps: [{reply: x}]}]}]}", "two branches or more"},
		{"scripts: {a: [{choose: [{weight: 0, steps: [{reply: x}]}, {weight: 0, steps: [{reply: y}]}]}]}", "add up to more than 0"},
		{"scripts: {a: [{choose: [{weight: -1, steps: [{reply: x}]}, {weight: 2, steps: [{reply: y}]}]}]}", "at least 0"},
		{"scripts: {a: [{choose: [{weight: 1}, {weight: 2, steps: [{reply: y}]}]}]}", "steps"},
		{"scripts: {a: [{choose: [{weight: 1, steps: []}, {weight: 2, steps: [{reply: y}]}]}]}", "at least one step"},
		{"scripts: {a: [{choose: [{weight: 1, steps: [{reply: x}]}, {weight: 2, steps: [{reply: y}]}], reply: z}]}", "reply"},
	} {
		_, err := LoadScenario("c.yaml", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.doc, err)
		}
	}
}
