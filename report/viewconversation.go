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
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// The conversation page of troupe view: one agent's model calls in order,
// each with the messages it added to the history, its answer and its
// metering. It reads the agent's conversation record
// (agents/<id>/llm-conversation.jsonl.gz, llm/record.go's format) as a
// stream, a call at a time: a record stores each message once, as a block,
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
	Meter      *meterLine
}

// meterLine is one line of llm-calls.jsonl (modelcall.Record) as the page shows it.
type meterLine struct {
	modelcall.Record
	Shown string // its time, for the page
}

// convTop is the head of the page.
type convTop struct {
	Title, Home, Back, Agent string
	Running                  bool
	Recorded                 bool   // the trial has a conversation record for the agent
	Note                     string // why there is none, or what could not be read
	MeterNote                string
	Meter                    []meterLine // shown alone when there is no record
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
	dir := "agents/" + agent + "/"
	if _, _, err := tf.open(dir + "llm-calls.jsonl"); errors.Is(err, fs.ErrNotExist) {
		if _, _, err := tf.open(dir + "llm-conversation.jsonl.gz"); errors.Is(err, fs.ErrNotExist) {
			http.Error(w, "no model calls of agent "+agent+" in this trial", http.StatusNotFound)
			return
		}
	}

	q := url.Values{"t": {key}}
	top := convTop{Title: agent + " in " + t.Name, Agent: agent, Running: t.Outcome == outcomeRunning,
		Home: withBaseline("/", url.Values{}, baseline), Back: withBaseline("/trial", q, baseline)}
	meter, meterNote := readMeter(tf, dir+"llm-calls.jsonl")
	top.MeterNote = meterNote

	rec, _, err := tf.open(dir + "llm-conversation.jsonl.gz")
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
func readMeter(tf files, name string) ([]meterLine, string) {
	var out []meterLine
	note, err := tf.lines(name, func(line []byte, cut *Cut) {
		var m meterLine
		if cut != nil || len(out) >= maxCallsPerPage || json.Unmarshal(line, &m.Record) != nil {
			return
		}
		m.Shown = m.Time.UTC().Format("15:04:05.000")
		out = append(out, m)
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
	lines  []meterLine
	byTime map[time.Time][]int
	used   []bool
	next   int
}

func newMeterIndex(lines []meterLine) *meterIndex {
	m := &meterIndex{lines: lines, byTime: map[time.Time][]int{}, used: make([]bool, len(lines))}
	for i, l := range lines {
		k := l.Time.UTC()
		m.byTime[k] = append(m.byTime[k], i)
	}
	return m
}

func (m *meterIndex) match(at time.Time) *meterLine {
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

// streamCalls reads a record and writes each call as it is read. The
// record is read by llm's reader in Added mode: each call's list fields
// hold only the items it added, within limits that refuse, before they
// are built, calls naming more than a page can show.
func streamCalls(w *bufio.Writer, r io.Reader, meter []meterLine) convBottom {
	var out convBottom
	mi := newMeterIndex(meter)
	lastLen := map[string]int{} // each list field's length in the previous call
	var system, tools string    // the last shown
	var refused []string
	rr := modelcall.NewRecordReader(r, modelcall.RecordLimits{Decompressed: maxConvBytes, Call: maxConvPage, Record: maxConvBytes})
	rr.Added = true
	budget := pageBudget{left: maxConvPage}
	var readErr error
	for {
		line, err := rr.Next()
		if err == io.EOF {
			break
		}
		if e, ok := errors.AsType[*modelcall.ExpansionError](err); ok {
			out.Calls++
			if len(refused) < 10 {
				refused = append(refused, fmt.Sprintf("call %d is not shown: %v", e.Call, e))
			}
			if e.Record {
				readErr, out.Partial = err, true
				break
			}
			continue
		}
		if err != nil {
			readErr, out.Partial = err, true
			break
		}
		out.Calls++
		if out.Calls > maxConvCalls {
			continue // counted, for the note
		}
		c := convCall{N: line.N, Time: line.Time.UTC().Format("15:04:05.000"), API: string(line.API), Status: line.Status,
			Stream: line.Stream, Error: line.Error, Meter: mi.match(line.Time)}
		var req map[string]json.RawMessage
		if json.Unmarshal(line.Request, &req) != nil {
			// A request that was kept as it came (the gateway refused it).
			req = map[string]json.RawMessage{"input": line.Request}
		}
		repeated := rr.Repeated()
		for _, k := range slices.Sorted(mapKeys(req)) {
			prefix, isList := repeated[k]
			whole := req[k]
			var items []json.RawMessage
			if isList {
				json.Unmarshal(whole, &items)
			}
			switch k {
			case "messages", "input":
				if !isList {
					// A plain string input, or a request that was kept as it came.
					c.Messages = append(c.Messages, convMessage{Role: "user", Parts: budget.add(partsOf(whole))})
					continue
				}
				if prefix < lastLen[k] {
					c.Rewrote = fmt.Sprintf("this call repeats only %d of the previous call's %d messages: the agent cut or rewrote its history", prefix, lastLen[k])
				}
				lastLen[k] = prefix + len(items)
				for _, it := range items {
					if budget.left <= 0 {
						c.Messages = append(c.Messages, convMessage{Role: "?", Parts: []convPart{{Kind: "json", Text: "(the page's bound is reached: the rest of this call is not shown)"}}})
						break
					}
					m := messageOf(it)
					if m.Role == "system" || m.Role == "developer" {
						text := textOf(m.Parts)
						if text == system {
							continue
						}
						system = text
						c.System = append(c.System, budget.add(m.Parts)...)
						continue
					}
					m.Parts = budget.add(m.Parts)
					c.Messages = append(c.Messages, m)
				}
			case "system", "instructions":
				parts := partsOf(whole)
				if text := textOf(parts); text != system {
					system = text
					c.System = append(c.System, budget.add(parts)...)
				}
			case "tools":
				// A list names only the tools beyond those of the
				// previous call: none, they are unchanged.
				if isList && len(items) == 0 {
					continue
				}
				if s := indentJSON(whole); s != tools {
					tools = s
					c.Tools = clipPart(convPart{Text: s}).Text
					budget.left -= len(c.Tools)
				}
			case "model":
				json.Unmarshal(whole, &c.Model)
			}
		}
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
		c.Answer = budget.add(c.Answer)
		if line.AnswerOmitted > 0 {
			c.AnswerNote = fmt.Sprintf("%d bytes of the answer were not kept", line.AnswerOmitted)
		}
		if err := convPages.ExecuteTemplate(w, "conv-call", c); err != nil {
			out.Notes = append(out.Notes, "render: "+err.Error())
			return out
		}
		if budget.left <= 0 {
			// Reading on would only build what is not shown.
			out.Notes = append(out.Notes, fmt.Sprintf("the page stops at %d MiB of text, after call %d: the rest of the record is not read", maxConvPage>>20, line.N))
			out.Partial = true
			break
		}
	}
	out.Notes = append(out.Notes, refused...)
	if _, ok := errors.AsType[*modelcall.DecompressedError](readErr); ok {
		out.Notes = append(out.Notes, fmt.Sprintf("the record is read up to %d MiB decompressed; the rest is left out", maxConvBytes>>20))
	} else if _, ok := errors.AsType[*modelcall.TamperedError](readErr); ok {
		out.Notes = append(out.Notes, fmt.Sprintf("the record does not verify, and is shown only up to where it was changed: %v", readErr))
	} else if readErr != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("the record is not read to its end: %v", readErr))
	}
	if !rr.Verified() && out.Calls > 0 {
		out.Notes = append(out.Notes, "the record has no digests (written before troupe verified records): what it shows is unverified")
	}
	if out.Calls > maxConvCalls {
		out.Notes = append(out.Notes, fmt.Sprintf("the first %d of the %d calls are shown", maxConvCalls, out.Calls))
	}
	if missing := rr.Missing(); missing > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("%d messages the record names are not in it (troupe dropped part of it)", missing))
	}
	if skipped := rr.Skipped(); skipped > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("%d lines of the record are not calls (where troupe cut it)", skipped))
	}
	out.Unmatched = mi.unmatched()
	return out
}

func mapKeys(m map[string]json.RawMessage) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// messageOf reads one history item in any of the three wire formats:
// OpenAI chat and Anthropic messages ({role, content, tool_calls}),
// Responses input items ({type: message|function_call|function_call_output}).
func messageOf(raw json.RawMessage) convMessage {
	var m struct {
		Role       string          `json:"role"`
		Type       string          `json:"type"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		// Responses items.
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		CallID    string `json:"call_id"`
		Output    any    `json:"output"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return convMessage{Role: "?", Parts: []convPart{{Kind: "json", Text: indentJSON(raw)}}}
	}
	switch m.Type {
	case "function_call":
		return convMessage{Role: "assistant", Parts: []convPart{{Kind: "tool-call", Label: m.Name, Text: indentArgs(m.Arguments)}}}
	case "function_call_output":
		return convMessage{Role: "tool", Parts: []convPart{{Kind: "tool-result", Label: m.CallID, Text: stringOf(m.Output)}}}
	case "", "message":
	default:
		if m.Role == "" {
			return convMessage{Role: m.Type, Parts: []convPart{{Kind: "json", Text: indentJSON(raw)}}}
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
		out.Parts = append(out.Parts, convPart{Kind: "tool-call", Label: tc.Function.Name, Text: indentArgs(tc.Function.Arguments)})
	}
	return out
}

// partsOf reads a content: a string, or a list of typed blocks (text,
// Anthropic's tool_use and tool_result, Responses' input_text).
func partsOf(raw json.RawMessage) []convPart {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []convPart{{Kind: "text", Text: s}}
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return []convPart{{Kind: "json", Text: indentJSON(raw)}}
	}
	var out []convPart
	for _, b := range blocks {
		var blk struct {
			Type      string          `json:"type"`
			Text      *string         `json:"text"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if json.Unmarshal(b, &blk) != nil {
			out = append(out, convPart{Kind: "json", Text: indentJSON(b)})
			continue
		}
		switch {
		case blk.Type == "tool_use":
			out = append(out, convPart{Kind: "tool-call", Label: blk.Name, Text: indentJSON(blk.Input)})
		case blk.Type == "tool_result":
			out = append(out, convPart{Kind: "tool-result", Label: blk.ToolUseID, Text: textOf(partsOf(blk.Content))})
		case blk.Text != nil:
			out = append(out, convPart{Kind: "text", Text: *blk.Text})
		default:
			out = append(out, convPart{Kind: "json", Text: indentJSON(b)})
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

func stringOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	data, _ := json.MarshalIndent(v, "", "  ")
	return string(data)
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
