package report

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trialdir"
)

// The conversation page of troupe view: one agent's model calls in order,
// each with the messages it added to the history, its answer and its
// metering. It reads the agent's conversation record
// (agents/<id>/llm-conversation.jsonl.gz, package modelcall's format) as
// a stream, a call at a time: a record stores each message once, as a block,
// and each call says how many of the previous call's messages it starts
// with ("$prefix") and names the rest, which are exactly the messages it
// adds. The page is written as the record is read, so neither the record's
// requests whole (which grow with the square of the calls) nor the page
// are ever held in memory.

// Bounds of the conversation page.
const (
	maxConvCalls   = 2000      // calls shown; a note says how many more the record holds
	maxConvBytes   = 256 << 20 // of the record, decompressed
	maxConvPage    = 32 << 20  // of text on the page; the calls past it are counted
	maxPartShown   = 256 << 10 // of one message's part; the rest is counted
	foldBytes      = 2 << 10   // content longer than this is folded
	foldSummaryLen = 160       // characters of folded content shown in its summary
)

var convPages = template.Must(template.New("conversation").Funcs(funcs).Funcs(template.FuncMap{
	"deref":      func(p *float64) float64 { return *p },
	"cutSummary": cutSummary,
	"clock":      clock,
}).ParseFS(templateFS, "templates/parts.html", "templates/view.html", "templates/conversation.html"))

// convPart is one piece of a message or an answer: text, a tool call, a
// tool result, or what the page does not know, as JSON.
type convPart struct {
	Kind  string // "text", "tool-call", "tool-result", "system", "json"
	Label string // a tool's name, a call id
	Text  string
}

// clipPart keeps the first maxPartShown bytes of a part's text, on a whole
// character, and says how many it left out.
func clipPart(p convPart) convPart {
	if len(p.Text) <= maxPartShown {
		return p
	}
	cut := strings.ToValidUTF8(p.Text[:maxPartShown], "")
	p.Text = cut + fmt.Sprintf("\n… %d bytes more are not shown …", len(p.Text)-len(cut))
	return p
}

// Long: the part is folded.
func (p convPart) Long() bool { return len(p.Text) > foldBytes }

// Summary is the start of a folded part, on whole characters.
func (p convPart) Summary() string {
	s := p.Text
	if len(s) > foldSummaryLen {
		s = strings.ToValidUTF8(s[:foldSummaryLen], "")
	}
	return strings.Join(strings.Fields(s), " ") + "…"
}

// convMessage is one message a call added to the history.
type convMessage struct {
	Role  string
	Parts []convPart
}

// convCall is one call on the page.
type convCall struct {
	N        int64
	Time     string
	API      string
	Status   int
	Stream   bool
	Model    string
	System   []convPart // the system prompt, where it is new
	Tools    string     // the tool list, where it is new, as JSON
	Messages []convMessage
	// Rewrote: the call did not repeat all of the previous call's
	// messages (the agent cut or rewrote its history).
	Rewrote string
	Answer  []convPart
	// AnswerNote says what is missing of the answer.
	AnswerNote string
	Error      string
	Meter      *modelcall.Record
}

// clock is a time of the page, in UTC.
func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// convTop is the head of the page.
type convTop struct {
	Title, Home, Back, Agent string
	Running                  bool
	Recorded                 bool   // the trial has a conversation record for the agent
	Note                     string // why there is none, or what could not be read
	MeterNote                string
	Meter                    []modelcall.Record // shown alone when there is no record
}

// convBottom is the foot of the page.
type convBottom struct {
	Recorded  bool
	Calls     int64
	Partial   bool // the record was not read to its end: Calls were read
	Notes     []string
	Unmatched int // metering lines no recorded call matched
}

func (v *Viewer) conversation(w http.ResponseWriter, key, agent, baseline string) {
	if !safeID(agent) {
		http.Error(w, "no such trial under "+v.Dir, http.StatusNotFound)
		return
	}
	t, tf, ok := v.openTrial(w, key)
	if !ok {
		return
	}
	defer tf.root.Close()
	if _, _, err := tf.open(trialdir.Calls(agent)); errors.Is(err, fs.ErrNotExist) {
		if _, _, err := tf.open(trialdir.Conversation(agent)); errors.Is(err, fs.ErrNotExist) {
			http.Error(w, "no model calls of agent "+agent+" in this trial", http.StatusNotFound)
			return
		}
	}

	q := url.Values{"t": {key}}
	top := convTop{Title: agent + " in " + t.TrialName, Agent: agent, Running: t.Outcome == outcomeRunning,
		Home: withBaseline("/", url.Values{}, baseline), Back: withBaseline("/trial", q, baseline)}
	meter, meterNote := readMeter(tf, trialdir.Calls(agent))
	top.MeterNote = meterNote

	rec, _, err := tf.open(trialdir.Conversation(agent))
	var zr *gzip.Reader
	if err == nil {
		defer rec.Close()
		zr, err = gzip.NewReader(rec)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		top.Note = "The conversation was not recorded (the trial ran with --record meta, or before troupe kept conversations): only the metering of each call is shown."
		top.Meter = meter
	case err != nil:
		top.Note = fmt.Sprintf("The conversation record is not read (%v): only the metering of each call is shown.", err)
		top.Meter = meter
	default:
		top.Recorded = true
	}

	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	if err := convPages.ExecuteTemplate(bw, "conv-top", top); err != nil {
		fmt.Fprintf(bw, "<p class=\"warning\">%s</p>", template.HTMLEscapeString("render: "+err.Error()))
		return
	}
	var bottom convBottom
	if top.Recorded {
		bottom = streamCalls(bw, zr, meter)
		bottom.Recorded = true
	}
	convPages.ExecuteTemplate(bw, "conv-bottom", bottom)
}

// readMeter reads an agent's llm-calls.jsonl, within the page's bounds.
func readMeter(tf files, name string) ([]modelcall.Record, string) {
	var out []modelcall.Record
	note, err := tf.lines(name, func(line []byte, cut *Cut) {
		if cut != nil || len(out) >= maxCallsPerPage {
			return
		}
		if r, ok := modelcall.ParseRecord(line); ok {
			out = append(out, r)
		}
	})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		note = "there is no call log (" + name + "): no call is metered"
	case err != nil:
		note = fmt.Sprintf("the call log is not read (%v)", err)
	}
	return out, note
}

// meterIndex matches recorded calls to metering lines: by time (the
// gateway stamps both with the call's start), else in order.
type meterIndex struct {
	lines  []modelcall.Record
	byTime map[time.Time][]int
	used   []bool
	next   int
}

func newMeterIndex(lines []modelcall.Record) *meterIndex {
	m := &meterIndex{lines: lines, byTime: map[time.Time][]int{}, used: make([]bool, len(lines))}
	for i, l := range lines {
		k := l.Time.UTC()
		m.byTime[k] = append(m.byTime[k], i)
	}
	return m
}

func (m *meterIndex) match(at time.Time) *modelcall.Record {
	pick := -1
	for _, i := range m.byTime[at.UTC()] {
		if !m.used[i] {
			pick = i
			break
		}
	}
	if pick < 0 {
		for m.next < len(m.lines) && m.used[m.next] {
			m.next++
		}
		if m.next >= len(m.lines) {
			return nil
		}
		pick = m.next
	}
	m.used[pick] = true
	return &m.lines[pick]
}

func (m *meterIndex) unmatched() int {
	n := 0
	for _, u := range m.used {
		if !u {
			n++
		}
	}
	return n
}

// pageBudget is what is left of the page's text; parts are clipped to
// maxPartShown as they are added.
type pageBudget struct{ left int }

func (b *pageBudget) add(parts []convPart) []convPart {
	for i := range parts {
		parts[i] = clipPart(parts[i])
		b.left -= len(parts[i].Text) + len(parts[i].Label)
	}
	return parts
}

// convPage writes a record's calls on the page as they are read: what
// it showed last (the system prompt, the tools, each history's length)
// so that a call shows only what is new, and what is left of the page.
type convPage struct {
	w       *bufio.Writer
	rr      *modelcall.RecordReader
	meter   *meterIndex
	budget  pageBudget
	lastLen map[string]int // each list field's length in the previous call
	system  string         // the last shown
	tools   string
	refused []string
	out     convBottom
}

// streamCalls reads a record and writes each call as it is read. The
// record is read by modelcall's reader in Added mode: each call's list
// fields hold only the items it added, within limits that refuse, before
// they are built, calls naming more than a page can show.
func streamCalls(w *bufio.Writer, r io.Reader, meter []modelcall.Record) convBottom {
	p := &convPage{w: w, meter: newMeterIndex(meter), budget: pageBudget{left: maxConvPage}, lastLen: map[string]int{},
		rr: modelcall.NewRecordReader(r, modelcall.RecordLimits{Decompressed: maxConvBytes, Call: maxConvPage, Record: maxConvBytes})}
	p.rr.Added = true
	rendered, readErr := p.calls()
	if !rendered {
		return p.out
	}
	p.notes(readErr)
	p.out.Unmatched = p.meter.unmatched()
	return p.out
}

// calls writes the record's calls; it returns false when the page could
// not be rendered, and the error that ended the reading.
func (p *convPage) calls() (rendered bool, readErr error) {
	for {
		line, err := p.rr.Next()
		if err == io.EOF {
			return true, nil
		}
		if e, ok := errors.AsType[*modelcall.ExpansionError](err); ok {
			p.out.Calls++
			if len(p.refused) < 10 {
				p.refused = append(p.refused, fmt.Sprintf("call %d is not shown: %v", e.Call, e))
			}
			if e.Record {
				p.out.Partial = true
				return true, err
			}
			continue
		}
		if err != nil {
			p.out.Partial = true
			return true, err
		}
		p.out.Calls++
		if p.out.Calls > maxConvCalls {
			continue // counted, for the note
		}
		c := convCall{N: line.N, Time: clock(line.Time), API: string(line.API), Status: line.Status,
			Stream: line.Stream, Error: line.Error, Meter: p.meter.match(line.Time)}
		p.request(&c, line)
		p.answer(&c, line)
		if err := convPages.ExecuteTemplate(p.w, "conv-call", c); err != nil {
			p.out.Notes = append(p.out.Notes, "render: "+err.Error())
			return false, nil
		}
		if p.budget.left <= 0 {
			// Reading on would only build what is not shown.
			p.out.Notes = append(p.out.Notes, fmt.Sprintf("the page stops at %d MiB of text, after call %d: the rest of the record is not read", maxConvPage>>20, line.N))
			p.out.Partial = true
			return true, nil
		}
	}
}

// request shows what a call's request added: its new messages, a system
// prompt or tools that changed, its model.
func (p *convPage) request(c *convCall, line modelcall.Call) {
	req, err := modelcall.ParseRequest(line.API, line.Request)
	if err != nil {
		// A request that was kept as it came (the gateway refused it).
		req.Fields = map[string]json.RawMessage{"input": line.Request}
	}
	repeated := p.rr.Repeated()
	for _, k := range slices.Sorted(maps.Keys(req.Fields)) {
		prefix, isList := repeated[k]
		whole := req.Fields[k]
		switch k {
		case "messages", "input":
			if !isList {
				// A plain string input, or a request that was kept as it came.
				c.Messages = append(c.Messages, convMessage{Role: "user", Parts: p.budget.add(partsOf(modelcall.ParseContent(whole)))})
				continue
			}
			p.history(c, k, prefix, modelcall.ParseMessages(whole))
		case "system", "instructions":
			parts := partsOf(modelcall.ParseContent(whole))
			if text := textOf(parts); text != p.system {
				p.system = text
				c.System = append(c.System, p.budget.add(parts)...)
			}
		case "tools":
			// A list names only the tools beyond those of the previous
			// call: none, they are unchanged.
			if isList && string(whole) == "[]" {
				continue
			}
			if s := indentJSON(whole); s != p.tools {
				p.tools = s
				c.Tools = clipPart(convPart{Text: s}).Text
				p.budget.left -= len(c.Tools)
			}
		case "model":
			c.Model = req.Model()
		}
	}
}

// history shows the messages a call added to a history field (k), after
// the prefix it repeats of the previous call's; a system message only
// when it says something new.
func (p *convPage) history(c *convCall, k string, prefix int, added []modelcall.Message) {
	if prefix < p.lastLen[k] {
		c.Rewrote = fmt.Sprintf("this call repeats only %d of the previous call's %d messages: the agent cut or rewrote its history", prefix, p.lastLen[k])
	}
	p.lastLen[k] = prefix + len(added)
	for _, it := range added {
		if p.budget.left <= 0 {
			c.Messages = append(c.Messages, convMessage{Role: "?", Parts: []convPart{{Kind: "json", Text: "(the page's bound is reached: the rest of this call is not shown)"}}})
			break
		}
		m := messageOf(it)
		if m.Role == "system" || m.Role == "developer" {
			text := textOf(m.Parts)
			if text == p.system {
				continue
			}
			p.system = text
			c.System = append(c.System, p.budget.add(m.Parts)...)
			continue
		}
		m.Parts = p.budget.add(m.Parts)
		c.Messages = append(c.Messages, m)
	}
}

// answer shows a call's answer: its text and tool calls, or what a failed
// call was answered.
func (p *convPage) answer(c *convCall, line modelcall.Call) {
	a := modelcall.AnswerOf(line)
	if a.Text != "" {
		c.Answer = append(c.Answer, convPart{Kind: "text", Text: a.Text})
	}
	for _, tc := range a.ToolCalls {
		args, _ := json.MarshalIndent(tc.Arguments, "", "  ")
		c.Answer = append(c.Answer, convPart{Kind: "tool-call", Label: tc.Name, Text: string(args)})
	}
	switch {
	case a.Failed && len(line.Answer) > 0:
		c.Answer = append(c.Answer, convPart{Kind: "json", Text: indentJSON(line.Answer)})
	case a.Failed && line.AnswerText != "":
		c.Answer = append(c.Answer, convPart{Kind: "json", Text: line.AnswerText})
	}
	c.Answer = p.budget.add(c.Answer)
	if line.AnswerOmitted > 0 {
		c.AnswerNote = fmt.Sprintf("%d bytes of the answer were not kept", line.AnswerOmitted)
	}
}

// notes say, at the page's foot, what of the record is not shown and why.
func (p *convPage) notes(readErr error) {
	notes := append(p.out.Notes, p.refused...)
	if _, ok := errors.AsType[*modelcall.DecompressedError](readErr); ok {
		notes = append(notes, fmt.Sprintf("the record is read up to %d MiB decompressed; the rest is left out", maxConvBytes>>20))
	} else if _, ok := errors.AsType[*modelcall.TamperedError](readErr); ok {
		notes = append(notes, fmt.Sprintf("the record does not verify, and is shown only up to where it was changed: %v", readErr))
	} else if readErr != nil {
		notes = append(notes, fmt.Sprintf("the record is not read to its end: %v", readErr))
	}
	if !p.rr.Verified() && p.out.Calls > 0 {
		notes = append(notes, "the record has no digests (written before troupe verified records): what it shows is unverified")
	}
	if p.out.Calls > maxConvCalls {
		notes = append(notes, fmt.Sprintf("the first %d of the %d calls are shown", maxConvCalls, p.out.Calls))
	}
	if missing := p.rr.Missing(); missing > 0 {
		notes = append(notes, fmt.Sprintf("%d messages the record names are not in it (troupe dropped part of it)", missing))
	}
	if skipped := p.rr.Skipped(); skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d lines of the record are not calls (where troupe cut it)", skipped))
	}
	p.out.Notes = notes
}

// messageOf shows one history item in any of the three wire formats:
// OpenAI chat and Anthropic messages ({role, content, tool_calls}),
// Responses input items ({type: message|function_call|function_call_output}).
func messageOf(m modelcall.Message) convMessage {
	if m.Malformed || m.BadFields {
		return convMessage{Role: "?", Parts: []convPart{{Kind: "json", Text: indentJSON(m.Raw)}}}
	}
	switch m.Type {
	case "function_call":
		return convMessage{Role: "assistant", Parts: []convPart{{Kind: "tool-call", Label: m.Name, Text: indentArgs(m.Arguments)}}}
	case "function_call_output":
		return convMessage{Role: "tool", Parts: []convPart{{Kind: "tool-result", Label: m.CallID, Text: outputText(m.Output)}}}
	case "", "message":
	default:
		if m.Role == "" {
			return convMessage{Role: m.Type, Parts: []convPart{{Kind: "json", Text: indentJSON(m.Raw)}}}
		}
	}
	out := convMessage{Role: m.Role}
	if m.Role == "" {
		out.Role = "?"
	}
	parts := partsOf(m.Content)
	if m.Role == "tool" {
		// An OpenAI chat tool result.
		out.Parts = []convPart{{Kind: "tool-result", Label: m.ToolCallID, Text: textOf(parts)}}
	} else {
		out.Parts = parts
	}
	for _, tc := range m.ToolCalls {
		out.Parts = append(out.Parts, convPart{Kind: "tool-call", Label: tc.Name, Text: indentArgs(tc.Arguments)})
	}
	return out
}

// partsOf shows a content: a string, or a list of typed blocks (text,
// Anthropic's tool_use and tool_result, Responses' input_text).
func partsOf(c modelcall.Content) []convPart {
	switch {
	case len(c.Raw) == 0 || string(c.Raw) == "null":
		return nil
	case c.IsText:
		return []convPart{{Kind: "text", Text: c.Text}}
	case !c.IsList:
		return []convPart{{Kind: "json", Text: indentJSON(c.Raw)}}
	}
	var out []convPart
	for _, b := range c.Parts {
		switch {
		case b.Malformed || b.BadName:
			out = append(out, convPart{Kind: "json", Text: indentJSON(b.Raw)})
		case b.Type == "tool_use":
			out = append(out, convPart{Kind: "tool-call", Label: b.Call.Name, Text: indentJSON(json.RawMessage(b.Call.Arguments))})
		case b.Type == "tool_result":
			out = append(out, convPart{Kind: "tool-result", Label: b.CallID, Text: textOf(partsOf(b.Content))})
		case b.HasText:
			out = append(out, convPart{Kind: "text", Text: b.Text})
		default:
			out = append(out, convPart{Kind: "json", Text: indentJSON(b.Raw)})
		}
	}
	return out
}

// textOf joins parts' text.
func textOf(parts []convPart) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// outputText shows a tool's output: its text, or its JSON.
func outputText(c modelcall.Content) string {
	switch {
	case c.IsText:
		return c.Text
	case len(c.Raw) == 0:
		return "null"
	}
	return indentJSON(c.Raw)
}

// indentArgs shows a tool call's arguments, JSON in a string.
func indentArgs(s string) string {
	if json.Valid([]byte(s)) {
		return indentJSON(json.RawMessage(s))
	}
	return s
}

func indentJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	data, _ := json.MarshalIndent(v, "", "  ")
	return string(data)
}
