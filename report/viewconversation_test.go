package report

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// recCall is one call to write into a test record: its request whole and
// its answer, as the gateway keeps them.
type recCall struct {
	at         time.Time
	status     int
	stream     bool
	request    map[string]any
	answer     string // a plain answer's JSON
	answerText string // a stream's events
}

// writeRecord writes a conversation record as modelcall's RecordWriter does:
// each array field's elements as blocks, a list that starts like the
// previous call's as "$prefix" and the rest, a field over 256 bytes as one
// block; then gzips it. It checks that modelcall.ReadConversation reads the
// requests back whole, so the test stays in the record's real format.
func writeRecord(t testing.TB, file string, calls []recCall) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	written := map[string]bool{}
	last := map[string][]string{}
	add := func(v json.RawMessage) string {
		sum := sha256.Sum256(v)
		id := hex.EncodeToString(sum[:12])
		if !written[id] {
			written[id] = true
			enc.Encode(map[string]any{"block": id, "json": v})
		}
		return id
	}
	for i, c := range calls {
		req := map[string]json.RawMessage{}
		for k, v := range c.request {
			data, _ := json.Marshal(v)
			var items []json.RawMessage
			switch {
			case json.Unmarshal(data, &items) == nil && len(items) > 0:
				ids := make([]string, len(items))
				for j, it := range items {
					ids[j] = add(it)
				}
				p := 0
				for p < len(last[k]) && p < len(ids) && last[k][p] == ids[p] {
					p++
				}
				last[k] = ids
				req[k], _ = json.Marshal(map[string]any{"$prefix": p, "$blocks": ids[p:]})
			case len(data) > 256:
				req[k], _ = json.Marshal(map[string]string{"$block": add(data)})
			default:
				req[k] = data
			}
		}
		line := map[string]any{"call": i + 1, "time": c.at, "api": "openai", "status": c.status, "stream": c.stream, "request": req}
		if c.answer != "" {
			line["answer"] = json.RawMessage(c.answer)
		}
		if c.answerText != "" {
			line["answer_text"] = c.answerText
		}
		enc.Encode(line)
	}
	got, missing, err := modelcall.ReadConversation(bytes.NewReader(buf.Bytes()))
	if err != nil || missing != 0 || len(got) != len(calls) {
		t.Fatalf("the test record does not read back: %d calls, %d missing, %v", len(got), missing, err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(buf.Bytes())
	zw.Close()
	if err := os.WriteFile(file, z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func chatAnswer(text string, toolName, toolArgs string) string {
	msg := map[string]any{"role": "assistant", "content": text}
	if toolName != "" {
		msg["tool_calls"] = []map[string]any{{"id": "call_1", "type": "function", "function": map[string]string{"name": toolName, "arguments": toolArgs}}}
	}
	data, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion", "model": "m",
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": "stop"}},
		"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	return string(data)
}

func writeMeter(t testing.TB, file string, recs []modelcall.Record) {
	var buf bytes.Buffer
	for _, r := range recs {
		data, _ := json.Marshal(r)
		buf.Write(append(data, '\n'))
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	systemPrompt = "You are worker-1, an implementer. " + strings.Repeat("Follow the lead's instructions. ", 30)
	longResult   = "LONGRESULT " + strings.Repeat("0123456789abcdef", 200) // over 2 KB: folded
)

// conversationTrial is the fixture's done trial with a three-call record
// for worker-1 and its metering lines.
func conversationTrial(t *testing.T) string {
	dir := copyFixture(t)
	agent := filepath.Join(dir, filepath.FromSlash(doneTrial), "agents", "worker-1")
	t0 := time.Date(2026, 11, 30, 7, 2, 49, 0, time.UTC)
	sys := map[string]any{"role": "system", "content": systemPrompt}
	user := map[string]any{"role": "user", "content": "Please write /app/hello.txt <script>alert(1)</script>"}
	asked := map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "call_1", "type": "function", "function": map[string]string{"name": "write_file", "arguments": `{"path":"/app/hello.txt"}`}}}}
	result := map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "wrote 5 bytes\n" + longResult}
	done := map[string]any{"role": "assistant", "content": "hello.txt written"}
	thanks := map[string]any{"role": "user", "content": "thanks, now stop"}
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "write_file", "parameters": map[string]any{"type": "object"}}}}
	writeRecord(t, filepath.Join(agent, "llm-conversation.jsonl.gz"), []recCall{
		{at: t0, status: 200, request: map[string]any{"model": "m", "messages": []any{sys, user}, "tools": tools},
			answer: chatAnswer("", "write_file", `{"path":"/app/hello.txt"}`)},
		{at: t0.Add(time.Second), status: 200, request: map[string]any{"model": "m", "messages": []any{sys, user, asked, result}, "tools": tools},
			answer: chatAnswer("hello.txt written", "", "")},
		{at: t0.Add(2 * time.Second), status: 200, stream: true, request: map[string]any{"model": "m", "messages": []any{sys, user, asked, result, done, thanks}, "tools": tools},
			answerText: "data: {\"choices\":[{\"delta\":{\"content\":\"bye \"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"for now\"}}]}\n\ndata: [DONE]\n\n"},
	})
	writeMeter(t, filepath.Join(agent, "llm-calls.jsonl"), []modelcall.Record{
		{Time: t0, Agent: "worker-1", Status: 200, LatencyMS: 812, InputTokens: 4321, CachedTokens: 1000, OutputTokens: 77, CostUSD: 0.0123},
		{Time: t0.Add(time.Second), Agent: "worker-1", Status: 200, LatencyMS: 90, InputTokens: 5000, OutputTokens: 5, CostUSD: 0.0042},
		{Time: t0.Add(2 * time.Second), Agent: "worker-1", Status: 200, LatencyMS: 3456, InputTokens: 5100, OutputTokens: 3, CostUSD: 0.005, Fault: "slow-stream"},
	})
	return dir
}

func callSection(t *testing.T, page string, n int) string {
	t.Helper()
	start := strings.Index(page, fmt.Sprintf(`<li id="call-%d"`, n))
	if start < 0 {
		t.Fatalf("the page has no call %d", n)
	}
	rest := page[start:]
	if end := strings.Index(rest, "</li>"); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

func TestConversationPage(t *testing.T) {
	dir := conversationTrial(t)
	srv := httptest.NewServer(&Viewer{Dir: dir})
	t.Cleanup(srv.Close)

	_, trialPage, _ := get(t, srv, "/trial?t="+url.QueryEscape(doneTrial))
	link := `href="/conversation?agent=worker-1&amp;t=` + url.QueryEscape(doneTrial) + `"`
	if !strings.Contains(trialPage, link) {
		t.Errorf("the trial page does not link the conversation (%s)", link)
	}

	code, page, h := get(t, srv, "/conversation?agent=worker-1&t="+url.QueryEscape(doneTrial))
	if code != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("conversation page: %d %v\n%s", code, h, page)
	}
	c1, c2, c3 := callSection(t, page, 1), callSection(t, page, 2), callSection(t, page, 3)
	checks := []struct {
		where, name, want string
	}{
		{c1, "the first user message, escaped", "Please write /app/hello.txt &lt;script&gt;alert(1)&lt;/script&gt;"},
		{c1, "the system prompt, folded", "<details class=\"msg\"><summary>system prompt"},
		{c1, "the tool call", "tool call write_file"},
		{c1, "the tool call's arguments", "&#34;path&#34;: &#34;/app/hello.txt&#34;"},
		{c1, "the tokens", "4321 in (1000 cached), 77 out"},
		{c1, "the latency", "812 ms"},
		{c1, "the cost", "$0.0123"},
		{c2, "the tool result", "tool result call_1"},
		{c2, "the tool result's text", "wrote 5 bytes"},
		{c2, "the folded long result", "<details><summary>wrote 5 bytes LONGRESULT"},
		{c2, "the answer's text", "hello.txt written"},
		{c3, "the new user message", "thanks, now stop"},
		{c3, "the streamed answer", "bye for now"},
		{c3, "the fault", "fault slow-stream"},
	}
	for _, c := range checks {
		if !strings.Contains(c.where, c.want) {
			t.Errorf("%s: lacks %q", c.name, c.want)
		}
	}
	if strings.Contains(c2, "Please write") || strings.Contains(c3, "wrote 5 bytes") || strings.Contains(c2, "tools offered") || strings.Contains(c2, "system prompt") {
		t.Error("a call repeats messages of the previous call")
	}
	if n := strings.Count(page, "You are worker-1, an implementer."); n != 1 {
		t.Errorf("the system prompt is shown %d times", n)
	}
	if strings.Contains(page, "<script>") || strings.Contains(strings.ToLower(page), "<script") {
		t.Error("the page holds an unescaped <script>")
	}
	if !strings.Contains(page, "3 calls in the record") {
		t.Error("the page does not count the calls")
	}

	// --record meta: the metering alone, and a note.
	os.Remove(filepath.Join(dir, filepath.FromSlash(doneTrial), "agents", "worker-1", "llm-conversation.jsonl.gz"))
	code, page, _ = get(t, srv, "/conversation?agent=worker-1&t="+url.QueryEscape(doneTrial))
	if code != 200 || !strings.Contains(page, "The conversation was not recorded") || !strings.Contains(page, "<td>4321</td>") || !strings.Contains(page, "slow-stream") {
		t.Errorf("a trial without a record: %d\n%s", code, page)
	}

	for _, p := range []string{"/conversation?agent=..&t=" + url.QueryEscape(doneTrial), "/conversation?agent=nobody&t=" + url.QueryEscape(doneTrial), "/conversation?agent=worker-1&t=../etc"} {
		if code, _, _ := get(t, srv, p); code != 404 {
			t.Errorf("%s: %d, want 404", p, code)
		}
	}
}

// bigConversation writes a record of n calls for worker-1, each adding a
// user message, a tool call and its result.
func bigConversation(t testing.TB, dir string, n int) {
	agent := filepath.Join(dir, filepath.FromSlash(doneTrial), "agents", "worker-1")
	t0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	msgs := []any{map[string]any{"role": "system", "content": systemPrompt}}
	var calls []recCall
	var meter []modelcall.Record
	for i := range n {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("step %d: %s", i, strings.Repeat("words of the turn ", 20))})
		at := t0.Add(time.Duration(i) * time.Second)
		calls = append(calls, recCall{at: at, status: 200, request: map[string]any{"model": "m", "messages": slicesClone(msgs)},
			answer: chatAnswer("", "run", fmt.Sprintf(`{"cmd":"ls /step/%d"}`, i))})
		meter = append(meter, modelcall.Record{Time: at, Status: 200, LatencyMS: 100, InputTokens: int64(100 * i), OutputTokens: 20, CostUSD: 0.001})
		msgs = append(msgs,
			map[string]any{"role": "assistant", "tool_calls": []map[string]any{{"id": fmt.Sprint("c", i), "type": "function", "function": map[string]string{"name": "run", "arguments": fmt.Sprintf(`{"cmd":"ls /step/%d"}`, i)}}}},
			map[string]any{"role": "tool", "tool_call_id": fmt.Sprint("c", i), "content": strings.Repeat("file ", 100+i%700)})
	}
	writeRecord(t, filepath.Join(agent, "llm-conversation.jsonl.gz"), calls)
	writeMeter(t, filepath.Join(agent, "llm-calls.jsonl"), meter)
}

func slicesClone(s []any) []any { return append([]any(nil), s...) }

// TestConversationPage500Calls: a 500-call record renders in under a second.
func TestConversationPage500Calls(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(viewFixture)); err != nil {
		t.Fatal(err)
	}
	bigConversation(t, dir, 500)
	srv := httptest.NewServer(&Viewer{Dir: dir})
	t.Cleanup(srv.Close)
	start := time.Now()
	code, page, _ := get(t, srv, "/conversation?agent=worker-1&t="+url.QueryEscape(doneTrial))
	took := time.Since(start)
	t.Logf("500 calls: %d bytes of page in %v", len(page), took)
	if code != 200 || !strings.Contains(page, `<li id="call-500"`) || !strings.Contains(page, "500 calls in the record") {
		t.Fatalf("%d, the page lacks the last call", code)
	}
	if n := strings.Count(page, "/step/499"); n != 1 {
		t.Errorf("the last tool call is shown %d times", n)
	}
	limit := time.Second
	if raceEnabled {
		limit *= 10 // the race detector slows everything down
	}
	if took > limit {
		t.Errorf("500 calls render in %v, over %v", took, limit)
	}
}

func BenchmarkConversationPage500(b *testing.B) {
	dir := b.TempDir()
	if err := os.CopyFS(dir, os.DirFS(viewFixture)); err != nil {
		b.Fatal(err)
	}
	bigConversation(b, dir, 500)
	v := &Viewer{Dir: dir, Hosts: []string{"*"}}
	path := "/conversation?agent=worker-1&t=" + url.QueryEscape(doneTrial)
	for b.Loop() {
		w := httptest.NewRecorder()
		v.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

// TestConversationPageBounded: a tampered record (one 256 KiB block, named
// 4,000 times by one call, or 20 times by each of 1,000 calls) makes a
// page within the page's bound, with a note of what is left out, and the
// viewer does not build what the record names.
func TestConversationPageBounded(t *testing.T) {
	for _, tc := range []struct {
		name        string
		calls, refs int
		want        string
	}{
		{"one call names a block 4,000 times", 1, 4000, "call 1 is not shown"},
		{"1,000 calls name it 20 times each", 1000, 20, "calls read; the rest of the record is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyFixture(t)
			rec := filepath.Join(dir, filepath.FromSlash(doneTrial), "agents", "worker-1", "llm-conversation.jsonl.gz")
			var raw bytes.Buffer
			fmt.Fprintf(&raw, "{\"block\":\"b\",\"json\":{\"role\":\"user\",\"content\":\"%s\"}}\n", strings.Repeat("a", 256<<10))
			ids := strings.TrimSuffix(strings.Repeat(`"b",`, tc.refs), ",")
			for n := range tc.calls {
				fmt.Fprintf(&raw, "{\"call\":%d,\"api\":\"openai\",\"status\":200,\"request\":{\"messages\":{\"$blocks\":[%s]}}}\n", n+1, ids)
			}
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			zw.Write(raw.Bytes())
			zw.Close()
			if err := os.WriteFile(rec, gz.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(&Viewer{Dir: dir})
			t.Cleanup(srv.Close)

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, err := srv.Client().Get(srv.URL + "/conversation?agent=worker-1&t=" + url.QueryEscape(doneTrial))
			if err != nil {
				t.Fatal(err)
			}
			// Read at most twice the bound: past it the page is too big.
			page, err := io.ReadAll(io.LimitReader(resp.Body, 2*maxConvPage))
			resp.Body.Close()
			runtime.ReadMemStats(&after)
			n := (after.TotalAlloc - before.TotalAlloc) >> 20
			t.Logf("record %d bytes gzipped; page %d bytes; %d MiB allocated", gz.Len(), len(page), n)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%d %v", resp.StatusCode, err)
			}
			if len(page) > maxConvPage+1<<20 {
				t.Errorf("the page is %d bytes, over its bound of %d", len(page), maxConvPage)
			}
			if !strings.Contains(string(page), tc.want) || !strings.HasSuffix(strings.TrimSpace(string(page)), "</html>") {
				t.Errorf("the page does not say %q, or is not whole: …%s", tc.want, page[max(0, len(page)-2000):])
			}
			if n > 384 { // a few copies of the page's bound, whatever the record names
				t.Errorf("the page allocated %d MiB", n)
			}
		})
	}
}
