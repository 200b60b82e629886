package llm

import (
	"fmt"

	"github.com/troupebench/troupe/modelcall"
)

// Unanswerable is a call the harness could not answer, whatever the agent
// did: its endpoint could not be reached, the provider refused the key,
// or a mock scenario has no step for it. A trial with one is not the
// team's failure: package trial ends it at once as unscored, with this as
// its reason, rather than letting the team flounder to its deadline.
type Unanswerable struct {
	Agent    string
	Endpoint string
	// Class is the call's error class (modelcall.ClassUnreachable,
	// ClassAuth) or the mock's code (mock_script_mismatch…).
	Class  string
	Status int
	// Reason says what happened and what to do, scrubbed like the call's
	// record.
	Reason string
}

func (u Unanswerable) Error() string {
	return fmt.Sprintf("agent %s's call to endpoint %s could not be answered (%s): %s", u.Agent, u.Endpoint, u.Class, u.Reason)
}

// Unanswerable delivers the trial's first unanswerable call, once.
func (t *Trial) Unanswerable() <-chan Unanswerable { return t.unanswerable }

// unanswerableWhy says why a settled call is the harness's failure, or
// "": an upstream that could not be reached, a key refused (401 or 403
// from a real provider; a scripted or injected one is a test's), or a
// mock with no step for the call. c.harness is the mock's say.
func unanswerableWhy(c *call) (class, why string) {
	switch {
	case c.harness != "":
		return c.harnessClass, c.harness
	case c.fault != "" || c.st.script != nil || c.replayed != nil:
		return "", "" // injected, scripted or replayed: the test's own
	case c.errClass == modelcall.ClassUnreachable:
		return c.errClass, c.errMsg + " (is the endpoint's base_url right, and the server up?)"
	case c.errClass == modelcall.ClassAuth:
		return c.errClass, fmt.Sprintf("the provider answered %d: it refuses the endpoint's key (check the variable api_key_env names)", c.status)
	}
	return "", ""
}

// reportUnanswerable hands the trial its first unanswerable call without
// ever blocking one.
func (t *Trial) reportUnanswerable(c *call) {
	class, why := unanswerableWhy(c)
	if why == "" {
		return
	}
	u := Unanswerable{Agent: c.st.spec.ID, Endpoint: c.st.endpoint.Name, Class: class, Status: c.status, Reason: string(t.scrubber.Scrub([]byte(why)))}
	select {
	case t.unanswerable <- u:
	default:
	}
}
