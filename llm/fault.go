package llm

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// Fault disturbs calls, for tests and chaos conditions, in front of any
// endpoint, real or mock. Faults are tried in order; the first that matches a
// call and has uses left applies to it.
type Fault struct {
	// Endpoint and Agent select calls; empty matches any.
	Endpoint, Agent string
	// Status answers with this HTTP status instead of forwarding, with
	// RetryAfter (whole seconds) as the Retry-After header when set.
	Status     int
	RetryAfter time.Duration
	// Delay holds the call this long before forwarding.
	Delay time.Duration
	// CutAfterEvents ends a streamed response after this many events.
	CutAfterEvents int
	// Hang holds the call until the caller gives up.
	Hang bool
	// Times is how many calls the fault applies to; 0 is every call.
	Times int
}

func (f Fault) String() string {
	var parts []string
	if f.Status != 0 {
		parts = append(parts, fmt.Sprintf("status %d", f.Status))
	}
	if f.Delay > 0 {
		parts = append(parts, "delay "+f.Delay.String())
	}
	if f.CutAfterEvents > 0 {
		parts = append(parts, fmt.Sprintf("cut after %d events", f.CutAfterEvents))
	}
	if f.Hang {
		parts = append(parts, "hang")
	}
	return strings.Join(parts, ", ")
}

type faultState struct {
	Fault
	used int
}

// SetFaults replaces the faults the gateway injects.
func (g *Gateway) SetFaults(faults ...Fault) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.faults = g.faults[:0]
	for _, f := range faults {
		g.faults = append(g.faults, &faultState{Fault: f})
	}
}

// takeFault returns the fault that applies to a call, using it up once.
func (g *Gateway) takeFault(st *agentState) *faultState {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range g.faults {
		if (f.Endpoint == "" || f.Endpoint == st.endpoint.Name) && (f.Agent == "" || f.Agent == st.spec.ID) && (f.Times == 0 || f.used < f.Times) {
			f.used++
			return f
		}
	}
	return nil
}

// apply plays the fault before forwarding; it reports whether the call
// should go on to the upstream. A delay or a hang ends with the call's
// context: when the agent hangs up or the trial ends.
func (f *faultState) apply(w http.ResponseWriter, c *call) bool {
	if f.Delay > 0 {
		if wait(c.ctx, f.Delay) != nil {
			c.gone(w, "during an injected delay")
			return false
		}
	}
	if f.Hang {
		c.held.Store(true)
		<-c.ctx.Done()
		c.gone(w, "on a call hung by an injected fault")
		return false
	}
	if f.Status != 0 {
		if f.RetryAfter > 0 {
			c.retryAfter = strconv.Itoa(int(f.RetryAfter.Round(time.Second).Seconds()))
			w.Header().Set("Retry-After", c.retryAfter)
		}
		c.status, c.errClass = f.Status, classifyStatus(f.Status)
		writeError(w, c.api, f.Status, errorType(f.Status), fmt.Sprintf("injected fault: %s", f))
		return false
	}
	c.cutAfter = f.CutAfterEvents
	return true
}

// errorType is the error type the providers use for a status.
func errorType(status int) string {
	switch classifyStatus(status) {
	case modelcall.ClassRateLimit:
		return "rate_limit_error"
	case modelcall.ClassOverloaded:
		return "overloaded_error"
	case modelcall.ClassAuth:
		return "authentication_error"
	case modelcall.ClassBadRequest:
		return "invalid_request_error"
	}
	return "api_error"
}
