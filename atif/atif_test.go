package atif_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/troupebench/troupe/atif"
	"github.com/troupebench/troupe/atif/atiftest"
)

// write writes a file of the trial folder, making its folder.
func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func gz(t *testing.T, lines ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(strings.Join(lines, "\n") + "\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// trialFolder is a small trial: lead-1 speaks chat completions (its
// record uses blocks and prefixes as the gateway writes them), worker-1
// Anthropic's messages with a streamed answer and a failed call, and
// meta-1 has no conversation record (--record meta).
func trialFolder(t *testing.T) string {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "result.json"), []byte(`{"troupe_trial_id":"hello__team__1-0a0b0c0d","trial_name":"hello__team__1","task_name":"hello","condition":"team","troupe_version":"v0.9.0","outcome":"passed",
"agents":[
 {"id":"lead-1","role":"lead","kind":"orchestrator","endpoint":"gpt-test","pubkey":"bb02","usage":{"calls":2,"input_tokens":300,"cached_tokens":100,"output_tokens":30,"cost_usd":0.0123}},
 {"id":"worker-1","role":"implementer","kind":"worker","endpoint":"claude-test","pubkey":"cc03","usage":{"calls":2}},
 {"id":"meta-1","role":"reviewer","kind":"worker","endpoint":"gpt-test","pubkey":"dd04","usage":{"calls":1}}]}`))
	write(t, filepath.Join(dir, "relay", "members.json"), []byte(`[{"id":"user","role":"user","kind":"user","pubkey":"aa01"},
{"id":"lead-1","role":"lead","kind":"orchestrator","pubkey":"bb02"},{"id":"worker-1","role":"implementer","kind":"worker","pubkey":"cc03"},
{"id":"meta-1","role":"reviewer","kind":"worker","pubkey":"dd04"}]`))
	write(t, filepath.Join(dir, "relay", "transcript.jsonl"), []byte(strings.Join([]string{
		`{"seq":1,"received_at":"2026-12-01T10:00:00Z","event":{"kind":9,"id":"e1","pubkey":"aa01","tags":[["h","x"],["p","bb02"]],"content":"Create hello.txt"}}`,
		`{"seq":2,"received_at":"2026-12-01T10:00:01Z","event":{"kind":30000,"id":"e2","pubkey":"bb02","tags":[],"content":"not a message"}}`,
		`[troupe cut 120 bytes here]`,
		`{"seq":3,"received_at":"2026-12-01T10:00:02Z","event":{"kind":9,"id":"e3","pubkey":"bb02","tags":[["p","cc03"]],"content":"@worker-1 write it"}}`,
		`{"seq":4,"received_at":"2026-12-01T10:00:05Z","event":{"kind":9,"id":"e4","pubkey":"bb02","tags":[["p","aa01"]],"content":"DONE: written"}}`,
	}, "\n")+"\n"))

	sys := `{"role":"system","content":"You lead."}`
	user := `{"role":"user","content":"Message for you from user (user):\nCreate hello.txt"}`
	echo := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_A","type":"function","function":{"name":"shell","arguments":"{\"command\":\"echo hi > hello.txt\"}"}}]}`
	tool := `{"role":"tool","tool_call_id":"call_A","content":"exit 0\n"}`
	tools := `{"type":"function","function":{"name":"shell","parameters":{"type":"object"}}}`
	write(t, filepath.Join(dir, "agents", "lead-1", "llm-conversation.jsonl.gz"), gz(t,
		`{"block":"s","json":`+sys+`}`, `{"block":"u","json":`+user+`}`, `{"block":"t","json":`+tools+`}`,
		`{"call":1,"time":"2026-12-01T10:00:00.5Z","api":"openai","status":200,"stream":false,"request":{"model":"gpt","messages":{"$blocks":["s","u"]},"tools":{"$blocks":["t"]}},`+
			`"answer":{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_A","type":"function","function":{"name":"shell","arguments":"{\"command\":\"echo hi > hello.txt\"}"}}]}}],"usage":{"prompt_tokens":100,"completion_tokens":10}}}`,
		`{"block":"e","json":`+echo+`}`, `{"block":"r","json":`+tool+`}`,
		`{"call":2,"time":"2026-12-01T10:00:01.25Z","api":"openai","status":200,"stream":true,"request":{"model":"gpt","messages":{"$prefix":2,"$blocks":["e","r"]},"tools":{"$prefix":1}},`+
			`"answer_text":"data: {\"choices\":[{\"delta\":{\"content\":\"Written.\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":200,\"completion_tokens\":20}}\n\ndata: [DONE]\n\n"}`,
	))
	write(t, filepath.Join(dir, "agents", "lead-1", "llm-calls.jsonl"), []byte(
		`{"time":"2026-12-01T10:00:00.5Z","agent":"lead-1","status":200,"input_tokens":100,"cached_tokens":0,"output_tokens":10,"cost_usd":0.004}`+"\n"+
			`{"time":"2026-12-01T10:00:01.25Z","agent":"lead-1","status":200,"input_tokens":200,"cached_tokens":100,"output_tokens":20,"cached_source":"reported","cost_usd":0.0083}`+"\n"))

	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":50,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Checking.\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"shell\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\":\\\"cat hello.txt\\\"}\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":12}}\n\n"
	streamJSON, _ := json.Marshal(stream)
	wUser := `{"role":"user","content":"Message for you from lead-1 (lead):\n@worker-1 write it"}`
	wEcho := `{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"shell","input":{"command":"cat hello.txt"}}]}`
	wResult := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"hi"}]}]}`
	write(t, filepath.Join(dir, "agents", "worker-1", "llm-conversation.jsonl.gz"), gz(t,
		`{"call":1,"time":"2026-12-01T10:00:02.5Z","api":"anthropic","status":200,"stream":true,"request":{"model":"claude","system":"You implement.","messages":[`+wUser+`],"tools":[{"name":"shell","description":"run","input_schema":{"type":"object"}}]},"answer_text":`+string(streamJSON)+`}`,
		`{"call":2,"time":"2026-12-01T10:00:03Z","api":"anthropic","status":529,"stream":false,"request":{"model":"claude","system":"You implement.","messages":[`+wUser+`,`+wEcho+`,`+wResult+`]},"answer":{"type":"error","error":{"type":"overloaded_error"}},"error":"upstream overloaded"}`,
	))
	write(t, filepath.Join(dir, "agents", "meta-1", "llm-calls.jsonl"), []byte(`{"time":"2026-12-01T10:00:04Z","agent":"meta-1","status":200}`+"\n"))
	return dir
}

func TestExportTrial(t *testing.T) {
	dir := trialFolder(t)
	x, err := atif.Trial(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "atif")
	written, err := atif.Write(out, x.Files)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 3 || len(x.Missing) != 1 || x.Missing[0].Agent != "meta-1" || !strings.Contains(x.Missing[0].Reason, "--record meta") {
		t.Fatalf("written %v, missing %+v", written, x.Missing)
	}
	docs := map[string]map[string]any{}
	for _, p := range written {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := atiftest.Check(data); err != nil {
			t.Errorf("%s does not validate:\n%v\n%s", p, err, data)
		}
		var doc map[string]any
		json.Unmarshal(data, &doc)
		docs[filepath.Base(p)] = doc
	}

	var lead atif.Trajectory
	data, _ := os.ReadFile(filepath.Join(out, "lead-1.json"))
	if err := json.Unmarshal(data, &lead); err != nil {
		t.Fatal(err)
	}
	if lead.SchemaVersion != atif.SchemaVersion || lead.SessionID != "hello__team__1-0a0b0c0d" || lead.Agent.Name != "lead-1 (lead)" || lead.Agent.ModelName != "gpt-test" || lead.Agent.Version != "v0.9.0" || len(lead.Agent.ToolDefinitions) != 1 {
		t.Errorf("lead's header: %+v", lead)
	}
	var sources []string
	for _, s := range lead.Steps {
		sources = append(sources, s.Source)
	}
	if got := strings.Join(sources, " "); got != "system user agent agent" {
		t.Fatalf("lead's steps: %s\n%s", got, data)
	}
	call := lead.Steps[2]
	if len(call.ToolCalls) != 1 || call.ToolCalls[0].ToolCallID != "call_A" || call.ToolCalls[0].FunctionName != "shell" || call.ToolCalls[0].Arguments["command"] != "echo hi > hello.txt" {
		t.Errorf("the first call's tool call: %+v", call.ToolCalls)
	}
	if o := call.Observation; o == nil || len(o.Results) != 1 || *o.Results[0].SourceCallID != "call_A" || *o.Results[0].Content != "exit 0\n" {
		t.Errorf("the tool result is not the first call's observation: %+v", call.Observation)
	}
	if m := lead.Steps[3].Metrics; lead.Steps[3].Message != "Written." || m == nil || *m.PromptTokens != 200 || *m.CachedTokens != 100 || *m.CostUSD != 0.0083 {
		t.Errorf("the streamed call's step: %+v %+v", lead.Steps[3], m)
	}
	if f := lead.FinalMetrics; f == nil || *f.TotalPromptTokens != 300 || *f.TotalCachedTokens != 100 || *f.TotalCostUSD != 0.0123 || *f.TotalSteps != 4 {
		t.Errorf("lead's final metrics: %+v", f)
	}

	var worker atif.Trajectory
	data, _ = os.ReadFile(filepath.Join(out, "worker-1.json"))
	json.Unmarshal(data, &worker)
	if len(worker.Steps) != 4 {
		t.Fatalf("worker's steps:\n%s", data)
	}
	first := worker.Steps[2]
	if first.Message != "Checking." || len(first.ToolCalls) != 1 || first.ToolCalls[0].ToolCallID != "toolu_1" || first.ToolCalls[0].Arguments["command"] != "cat hello.txt" ||
		first.Observation == nil || *first.Observation.Results[0].Content != "hi" || first.Metrics == nil || *first.Metrics.PromptTokens != 50 {
		t.Errorf("worker's streamed call: %+v", first)
	}
	if failed := worker.Steps[3]; failed.Extra["failed"] != true || failed.Extra["error"] != "upstream overloaded" || failed.Extra["status"] != float64(529) {
		t.Errorf("the failed call: %+v", failed)
	}
	if tools := worker.Agent.ToolDefinitions; len(tools) != 1 || tools[0]["type"] != "function" {
		t.Errorf("Anthropic tools not in OpenAI's shape: %v", tools)
	}

	team := docs["team.json"]
	steps := team["steps"].([]any)
	if len(steps) != 3 {
		t.Fatalf("team steps: %v", steps)
	}
	s0, s1 := steps[0].(map[string]any), steps[1].(map[string]any)
	if s0["source"] != "user" || s1["source"] != "agent" || s1["extra"].(map[string]any)["author"] != "lead-1" || s1["extra"].(map[string]any)["mentions"].([]any)[0] != "worker-1" {
		t.Errorf("team steps: %v", steps)
	}
}

// TestMetaTrial: a trial without conversation records still has its team.
func TestMetaTrial(t *testing.T) {
	dir := trialFolder(t)
	for _, a := range []string{"lead-1", "worker-1"} {
		os.Remove(filepath.Join(dir, "agents", a, "llm-conversation.jsonl.gz"))
	}
	x, err := atif.Trial(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Files) != 1 || x.Files[0].Name != "team.json" || len(x.Missing) != 3 {
		t.Fatalf("files %v, missing %v", x.Files, x.Missing)
	}
	if _, err := atif.Trial(t.TempDir()); err != atif.ErrNotTrial {
		t.Errorf("an empty folder: %v", err)
	}
}

// TestCheckRefuses: the checker fails documents that break Harbor's model.
func TestCheckRefuses(t *testing.T) {
	good := `{"schema_version":"ATIF-v1.7","agent":{"name":"a","version":"1"},"steps":[
{"step_id":1,"source":"user","message":"hi"},
{"step_id":2,"source":"agent","message":"","tool_calls":[{"tool_call_id":"c1","function_name":"f","arguments":{}}],
 "observation":{"results":[{"source_call_id":"c1","content":"ok"}]},"metrics":{"prompt_tokens":3,"cost_usd":0.5}}]}`
	if err := atiftest.Check([]byte(good)); err != nil {
		t.Fatalf("a good document: %v", err)
	}
	for name, edit := range map[string][2]string{
		"agent without name":        {`"name":"a",`, ``},
		"agent without version":     {`,"version":"1"`, ``},
		"step without message":      {`,"message":"hi"`, ``},
		"step without source":       {`"source":"user",`, ``},
		"tool call without id":      {`"tool_call_id":"c1",`, ``},
		"tool call without args":    {`,"arguments":{}`, ``},
		"observation without items": {`"results":[{"source_call_id":"c1","content":"ok"}]`, `"x":1`},
		"no steps":                  {`"steps":[`, `"steps":[],"x":[`},
		"step ids out of order":     {`"step_id":2`, `"step_id":3`},
		"unknown source":            {`"source":"user"`, `"source":"tool"`},
		"a field Harbor forbids":    {`"message":"hi"`, `"message":"hi","speaker":"u"`},
		"an integer as a string":    {`"prompt_tokens":3`, `"prompt_tokens":"3"`},
		"arguments as a string":     {`"arguments":{}`, `"arguments":"{}"`},
		"metrics on a user step":    {`"message":"hi"`, `"message":"hi","metrics":{}`},
		"an unknown call id":        {`"source_call_id":"c1"`, `"source_call_id":"c2"`},
		"a bad schema version":      {`ATIF-v1.7`, `ATIF-v9`},
		"a time that is not ISO":    {`"step_id":1,`, `"step_id":1,"timestamp":"yesterday",`},
	} {
		doc := strings.Replace(good, edit[0], edit[1], 1)
		if doc == good {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if err := atiftest.Check([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestExportRefusesTamperedFiles: files an attacker left in a trial folder
// cannot make the export build what they name: a 400-byte record naming a
// 256 KiB block 4,000 times is refused with the record, the call and the
// limit, before it is expanded; an oversized result.json is refused too.
func TestExportRefusesTamperedFiles(t *testing.T) {
	ids := strings.TrimSuffix(strings.Repeat(`"b",`, 4000), ",")
	record := gz(t, `{"block":"b","json":"`+strings.Repeat("a", 256<<10)+`"}`,
		`{"call":1,"time":"2026-12-01T10:00:00Z","api":"openai","status":200,"request":{"messages":{"$blocks":[`+ids+`]}}}`)
	result := []byte(`{"trial_name":"x","outcome":"passed","agents":[{"id":"lead-1","role":"lead"}]}`)
	for _, tc := range []struct {
		name   string
		files  map[string][]byte
		want   []string
		maxMiB uint64
	}{
		{"a record naming one block 4,000 times", map[string][]byte{"result.json": result, "agents/lead-1/llm-conversation.jsonl.gz": record},
			[]string{"agents/lead-1/llm-conversation.jsonl.gz", "call 1", "134217728"}, 32},
		{"a result.json of 17 MiB", map[string][]byte{"result.json": append(bytes.Repeat([]byte(" "), 17<<20), result...)},
			[]string{"result.json", "over 16777216 bytes"}, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tc.files {
				write(t, filepath.Join(dir, name), data)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := atif.Trial(dir)
			runtime.ReadMemStats(&after)
			n := (after.TotalAlloc - before.TotalAlloc) >> 20
			t.Logf("%d MiB allocated: %v", n, err)
			if err == nil {
				t.Fatal("exported")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error %q does not say %q", err, w)
				}
			}
			if n > tc.maxMiB {
				t.Errorf("the export allocated %d MiB, want under %d", n, tc.maxMiB)
			}
		})
	}
}
