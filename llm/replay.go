package llm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/troupebench/troupe/internal/textdiff"
	"github.com/troupebench/troupe/modelcall"
)

// A replay answers each agent's n-th call with the n-th answer of a
// recorded trial (TrialSpec.Replay) instead of asking the upstream: a
// harness change is checked against yesterday's trials for nothing, and a
// flaky failure is played again until it shows. A call is replayed only
// while the agent asks what it asked then. Values that differ between any
// two trials are not differences: the trials' ids and their members'
// pubkeys (Replay.Same), and times and durations in the text (a deadline's
// "4m58s left"). The first call that asks something else is the agent's
// divergence; from there on its recording no longer applies, and the
// replay's policy says what its calls get.

// Replay is a recorded trial to play back.
type Replay struct {
	// Calls are each recorded agent's calls, by agent id, as
	// modelcall.ReadConversation returns them.
	Calls map[string][]modelcall.Call
	// Same are the values that differ between the recorded trial and this
	// one and mean the same.
	Same []Same
	// OnDivergence is the policy; the zero value is DivergeStop.
	OnDivergence modelcall.DivergencePolicy
	// PastEndGrace is how long a call past the end of its agent's
	// recording is held before it counts as a divergence; the zero value
	// is DefaultPastEndGrace.
	PastEndGrace time.Duration
}

// DefaultPastEndGrace: a recording often ends with a call the trial's end
// cut short, unrecorded, which the replay's agent asks again. It is no
// divergence if the trial ends while the call waits (its agent swept, as
// in the recording); it is one if the trial goes on.
const DefaultPastEndGrace = 3 * time.Second

// Same is a value of the recorded trial (a member's pubkey, the trial's
// id) and its counterpart in the replay. Requests are compared with both
// shown as <Name>; recorded answers are played with Live in place of
// Recorded.
type Same struct {
	Name, Recorded, Live string
}

// replayState is a trial's replay.
type replayState struct {
	policy modelcall.DivergencePolicy
	grace  time.Duration
	// recordedNorm and liveNorm name the Same values of each side;
	// toLive puts the replay's values in the recording's answers.
	recordedNorm, liveNorm, toLive *strings.Replacer
	diverged                       chan modelcall.Divergence
	absent                         []modelcall.ReplayAgent // recorded agents the roster lacks
	// guarded by the trial's mutex
	divergences []modelcall.Divergence
	// stoppedBy is the divergence that ended a DivergeStop replay: from
	// it on, every agent's calls are refused, uncompared. What a call asks
	// after the stop may follow from the stop's own error (the diverged
	// agent tells its lead its model failed), so it is no divergence of
	// its own, and the report shows the one that ended the replay.
	stoppedBy *modelcall.Divergence
}

// replayCursor is one agent's place in its recording.
type replayCursor struct {
	calls    map[int64]modelcall.Call
	recorded int
	last     int64 // the recording's highest call number

	// guarded by the trial's mutex
	taken    int64
	diverged bool
	counts   modelcall.ReplayAgent
}

func newReplayState(spec TrialSpec) (*replayState, error) {
	rp := spec.Replay
	policy := rp.OnDivergence
	if policy == "" {
		policy = modelcall.DivergeStop
	}
	if _, err := modelcall.ParseDivergencePolicy(string(policy)); err != nil {
		return nil, err
	}
	var rec, live, to []string
	for _, s := range rp.Same {
		if s.Recorded == "" || s.Live == "" {
			continue
		}
		name := "<" + s.Name + ">"
		rec = append(rec, s.Recorded, name)
		live = append(live, s.Live, name)
		to = append(to, s.Recorded, s.Live)
	}
	rs := &replayState{policy: policy, grace: cmp.Or(rp.PastEndGrace, DefaultPastEndGrace), recordedNorm: strings.NewReplacer(rec...), liveNorm: strings.NewReplacer(live...), toLive: strings.NewReplacer(to...),
		diverged: make(chan modelcall.Divergence, len(spec.Agents))}
	inRoster := map[string]bool{}
	for _, a := range spec.Agents {
		inRoster[a.ID] = true
	}
	for _, id := range slices.Sorted(maps.Keys(rp.Calls)) {
		if !inRoster[id] {
			rs.absent = append(rs.absent, modelcall.ReplayAgent{ID: id, Recorded: len(rp.Calls[id]), NotInRoster: true})
		}
	}
	return rs, nil
}

func newReplayCursor(calls []modelcall.Call) *replayCursor {
	c := &replayCursor{calls: make(map[int64]modelcall.Call, len(calls)), recorded: len(calls)}
	for _, call := range calls {
		c.calls[call.N] = call
		c.last = max(c.last, call.N)
	}
	return c
}

// Diverged reports each agent's first divergence as it happens; nil when
// the trial is no replay.
func (t *Trial) Diverged() <-chan modelcall.Divergence {
	if t.replay == nil {
		return nil
	}
	return t.replay.diverged
}

// ReplayReport is the replay so far; nil when the trial is no replay.
func (t *Trial) ReplayReport() *modelcall.ReplayReport {
	rs := t.replay
	if rs == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &modelcall.ReplayReport{OnDivergence: rs.policy, Divergences: slices.Clone(rs.divergences)}
	for _, id := range slices.Sorted(maps.Keys(t.agents)) {
		cur := t.agents[id].replay
		a := cur.counts
		a.ID, a.Recorded = id, cur.recorded
		r.Agents = append(r.Agents, a)
	}
	r.Agents = append(r.Agents, rs.absent...)
	if r.Divergences == nil {
		r.Divergences = []modelcall.Divergence{}
	}
	return r
}

// replayCall matches a call with its agent's recording. It returns false
// when it has answered the call itself (refused, after a divergence);
// otherwise the call goes on, replayed (c.replayed) or live (c.live).
func (g *Gateway) replayCall(w http.ResponseWriter, c *call, body []byte) bool {
	st, t := c.st, c.st.trial
	rs, cur := t.replay, st.replay
	t.mu.Lock()
	cur.taken++
	n, diverged, stoppedBy := cur.taken, cur.diverged, rs.stoppedBy
	t.mu.Unlock()
	if stoppedBy == nil && !diverged {
		// The record was scrubbed when it was written: so is the request
		// it is compared with (an agent that printed its token sends it
		// in every later request; the record holds it redacted).
		d := cur.match(rs, n, t.records.Scrub(body))
		if d == nil {
			rec := cur.calls[n]
			c.replayed = &rec
			return true
		}
		if n > cur.last && !c.heldPastEnd(rs.grace) {
			c.gone(w, "while the replay held it, past the end of its agent's recording")
			return false
		}
		d.Agent, d.Call, d.Time = st.spec.ID, n, c.start.UTC()
		t.mu.Lock()
		// Another agent's divergence may have stopped the replay while
		// this call was compared or held: then this one is the stop's.
		if stoppedBy = rs.stoppedBy; stoppedBy == nil {
			cur.diverged = true
			rs.divergences = append(rs.divergences, *d)
			if rs.policy == modelcall.DivergeStop {
				rs.stoppedBy = d
			}
		}
		t.mu.Unlock()
		if stoppedBy == nil {
			rs.diverged <- *d // one per agent: the buffer holds them all
			g.Logger.Info("replay diverged", "trial", t.spec.ID, "agent", d.Agent, "call", n, "why", d.Why)
		}
	}
	if rs.policy == modelcall.DivergeLive {
		c.live = true
		return true
	}
	msg := fmt.Sprintf("troupe replay: call %d of agent %s is off its recording (the agent's first divergence is on the replay's report), and the replay answers such calls with this error (--on-divergence %s)", n, st.spec.ID, rs.policy)
	if stoppedBy != nil && stoppedBy.Agent != st.spec.ID {
		msg = fmt.Sprintf("troupe replay: the replay stopped at call %d of agent %s, which left its recording, and refuses every call from there (--on-divergence stop); call %d of agent %s was not compared", stoppedBy.Call, stoppedBy.Agent, n, st.spec.ID)
	}
	c.status, c.errClass, c.errMsg = http.StatusBadRequest, modelcall.ClassReplayDiverged, msg
	w.Header().Set("X-Should-Retry", "false")
	writeError(w, c.api, http.StatusBadRequest, "invalid_request_error", msg)
	return false
}

// heldPastEnd holds a call past the end of its agent's recording for
// grace, and reports whether the trial went on meanwhile (false: the
// agent hung up or the trial ended).
func (c *call) heldPastEnd(grace time.Duration) bool {
	c.held.Store(true)
	defer c.held.Store(false)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// match compares the agent's n-th call with the recorded one; nil when
// they ask the same.
func (cur *replayCursor) match(rs *replayState, n int64, body []byte) *modelcall.Divergence {
	rec, ok := cur.calls[n]
	switch {
	case ok:
	case cur.recorded == 0:
		return &modelcall.Divergence{Why: "the recording has no call of this agent"}
	case n > cur.last:
		return &modelcall.Divergence{Why: fmt.Sprintf("the recording has %d calls of this agent: this one is past them", cur.last)}
	default:
		return &modelcall.Divergence{Why: fmt.Sprintf("the recording lacks call %d (its record was bounded): it cannot be compared", n)}
	}
	was, is := normalize(rec.Request, rs.recordedNorm), normalize(body, rs.liveNorm)
	if was == is { // the usual case: the same harness writes the same bytes
		return nil
	}
	recorded, rv := canonical(was)
	asked, av := canonical(is)
	if bytes.Equal(recorded, asked) {
		return nil
	}
	diff := textdiff.Unified("recorded", "replay", readable(rv, recorded), readable(av, asked), 3, 120)
	if diff == "" {
		// The readable forms hide the difference (a number's spelling,
		// a byte YAML shows alike): show the bytes where they part.
		diff = firstDifference(recorded, asked)
	}
	return &modelcall.Divergence{Why: "the request differs from the recorded one", Diff: diff}
}

// firstDifference shows two requests around the first byte at which they
// differ, quoted, under the names a unified diff gives them.
func firstDifference(was, is []byte) string {
	at := 0
	for at < len(was) && at < len(is) && was[at] == is[at] {
		at++
	}
	window := func(b []byte) string {
		from, to := max(at-60, 0), min(at+60, len(b))
		return fmt.Sprintf("%q", b[from:to])
	}
	return fmt.Sprintf("--- recorded\n+++ replay\n@@ byte %d @@\n-%s\n+%s\n", at+1, window(was), window(is))
}

// normalize is a request as a replay compares it: the Same values named,
// and times and durations masked.
func normalize(body []byte, names *strings.Replacer) string {
	return maskTimes(names.Replace(string(body)))
}

// canonical is a normalized request as JSON with its keys sorted, and the
// value decoded (nil when it is not JSON): two requests that differ only
// in key order or spacing ask the same.
func canonical(s string) ([]byte, any) {
	var v any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return []byte(s), nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return []byte(s), nil
	}
	return out, v
}

// maskTimes replaces timestamps (RFC 3339, or with a space for the T) by
// <time> and durations as Go and most tools print them (4m58s, 1h0m0s,
// 0.25s, 300ms) by <duration>, each where a word starts. A scanner, not a
// regular expression: a long conversation's request is 100 KB, and a
// replay compares two per call.
func maskTimes(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		// Right after a mask is a word's start: the mask ends in '>'.
		if !isDigit(s[i]) || (i > 0 && i != last && isWordByte(s[i-1])) {
			i++
			continue
		}
		mask, n := "", timestampLen(s[i:])
		if n > 0 {
			mask = "<time>"
		} else if n = durationLen(s[i:]); n > 0 && (i+n == len(s) || !isWordByte(s[i+n])) {
			mask = "<duration>"
		} else {
			for i < len(s) && isWordByte(s[i]) {
				i++
			}
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString(mask)
		i += n
		last = i
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isWordByte(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || c == '_'
}

func digits(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// timestampLen is the length of the timestamp s starts with, 0 if none:
// YYYY-MM-DD[T ]hh:mm:ss[.frac][Z|±hh[:]mm].
func timestampLen(s string) int {
	const layout = "dddd-dd-ddTdd:dd:dd"
	if len(s) < len(layout) {
		return 0
	}
	for i := range len(layout) {
		switch c := s[i]; layout[i] {
		case 'd':
			if !isDigit(c) {
				return 0
			}
		case 'T':
			if c != 'T' && c != ' ' {
				return 0
			}
		default:
			if c != layout[i] {
				return 0
			}
		}
	}
	n := len(layout)
	if n+1 < len(s) && s[n] == '.' && isDigit(s[n+1]) {
		n += 1 + digits(s[n+1:])
	}
	switch {
	case n < len(s) && s[n] == 'Z':
		n++
	case n+3 <= len(s) && (s[n] == '+' || s[n] == '-') && digits(s[n+1:n+3]) == 2:
		z := n + 3
		if z < len(s) && s[z] == ':' {
			z++
		}
		if z+2 <= len(s) && digits(s[z:z+2]) == 2 {
			n = z + 2
		}
	}
	return n
}

// durationLen is the length of the duration s starts with, 0 if none:
// [N h][N m]N[.N](s|ms|µs|us|ns).
func durationLen(s string) int {
	n := 0
	if d := digits(s); d > 0 && d < len(s) && s[d] == 'h' {
		n = d + 1
	}
	if d := digits(s[n:]); d > 0 && n+d+1 < len(s) && s[n+d] == 'm' && isDigit(s[n+d+1]) {
		n += d + 1
	}
	d := digits(s[n:])
	if d == 0 {
		return 0
	}
	n += d
	if n+1 < len(s) && s[n] == '.' && isDigit(s[n+1]) {
		n += 1 + digits(s[n+1:])
	}
	for _, unit := range []string{"ms", "µs", "us", "ns", "s"} {
		if strings.HasPrefix(s[n:], unit) {
			return n + len(unit)
		}
	}
	return 0
}

// readable is a request for a person to diff: YAML, with multi-line text
// (a system prompt) as the lines it holds.
func readable(v any, canonical []byte) string {
	if v == nil {
		return string(canonical)
	}
	out, err := yaml.MarshalWithOptions(v, yaml.UseLiteralStyleIfMultiline(true))
	if err != nil {
		return string(canonical)
	}
	return string(out)
}

// replayResponse is the recorded answer of a replayed call, with the
// replay's values in place of the recording's.
func (g *Gateway) replayResponse(r *http.Request, c *call) *http.Response {
	rec, rs := c.replayed, c.st.trial.replay
	if c.mock && rs.policy == modelcall.DivergeLive {
		// The mock's script moves on as it did in the recording, so that
		// after a divergence it answers from the right step.
		if resp, err := g.mock.RoundTrip(r); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	status, contentType := rec.Status, "application/json"
	var answer []byte
	switch {
	case len(rec.Answer) > 0:
		answer = rec.Answer
	case rec.AnswerText != "":
		answer = []byte(rec.AnswerText)
		if rec.Stream {
			contentType = "text/event-stream"
		} else {
			contentType = "text/plain; charset=utf-8"
		}
	}
	if status == 0 {
		status = http.StatusBadGateway
	}
	if len(answer) == 0 && status >= 400 {
		answer = errorBody(c.api, "api_error", cmp.Or(rec.Error, http.StatusText(status)))
	}
	answer = []byte(rs.toLive.Replace(string(answer)))
	h, length := http.Header{"Content-Type": {contentType}}, int64(len(answer))
	if contentType == "text/event-stream" {
		length = -1
	} else {
		h.Set("Content-Length", strconv.Itoa(len(answer)))
	}
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(answer)), ContentLength: length, Request: r}
}

// live says whether a replay's agent has its calls answered by its
// endpoint now: it diverged, and the policy is live.
func (st *agentState) live() bool {
	t := st.trial
	t.mu.Lock()
	defer t.mu.Unlock()
	return st.replay.diverged && t.replay.policy == modelcall.DivergeLive
}

// countReplay adds a finished call to its agent's replay counts. The
// caller holds the trial's mutex.
func (st *agentState) countReplay(c *call, cost float64) {
	cur := st.replay
	switch {
	case c.replayed != nil:
		cur.counts.Replayed++
	case c.live:
		cur.counts.Live++
		cur.counts.LiveCostUSD += modelcall.USD(cost)
	case c.errClass == modelcall.ClassReplayDiverged:
		cur.counts.Refused++
	}
}
