package acpbridge

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/member"
)

func texts(blocks []acp.ContentBlock) []string {
	var out []string
	for _, b := range blocks {
		out = append(out, b.Text.Text)
	}
	return out
}

func TestBuildPrompt(t *testing.T) {
	in := turnInput{
		First: true, System: "You lead.", Self: member.Participant{ID: "lead-1", Role: "lead", Kind: "orchestrator"},
		Team: "lead-1 (lead), worker-1 (implementer), user (user)", Recent: []string{"worker-1 (implementer): done"},
		From: "user (user)", Message: "Build it.", TimeLeft: 90*time.Second + 400*time.Millisecond, Workdir: "/app",
	}
	got := texts(buildPrompt(in))
	if len(got) != 4 || got[0] != "You lead." || !strings.Contains(got[1], "You are lead-1 (role lead, orchestrator)") ||
		!strings.Contains(got[1], "worker-1 (implementer)") || got[2] != "Messages in the channel since you last heard from it, oldest first:\nworker-1 (implementer): done" ||
		got[3] != "Time left before the deadline: 1m30s. Working folder: /app.\n\nMessage for you from user (user):\nBuild it." {
		t.Errorf("first prompt %q", got)
	}
	in.First, in.Recent = false, nil
	if got := texts(buildPrompt(in)); len(got) != 1 || !strings.HasSuffix(got[0], "Build it.") {
		t.Errorf("later prompt %q", got)
	}
	// No system prompt: the note alone.
	in.First, in.System = true, " "
	if got := texts(buildPrompt(in)); len(got) != 2 || !strings.HasPrefix(got[0], "## This session") {
		t.Errorf("prompt without a system prompt %q", got)
	}
}

func TestAnswerFor(t *testing.T) {
	for _, c := range []struct {
		sent bool
		stop acp.StopReason
		text string
		want bool
	}{
		{false, acp.StopReasonEndTurn, "done", true},
		{false, acp.StopReasonMaxTokens, "half an answer", true},
		{false, acp.StopReasonRefusal, "I will not", true},
		{true, acp.StopReasonEndTurn, "done", false},
		{false, acp.StopReasonCancelled, "partial", false},
		{false, acp.StopReasonEndTurn, " \n", false},
	} {
		got, ok := answerFor(c.sent, c.stop, c.text)
		if ok != c.want || ok && got != c.text {
			t.Errorf("answerFor(%v, %s, %q) = %q, %v", c.sent, c.stop, c.text, got, ok)
		}
	}
}

func TestChoosePermission(t *testing.T) {
	opt := func(id string, kind acp.PermissionOptionKind) acp.PermissionOption {
		return acp.PermissionOption{OptionId: acp.PermissionOptionId(id), Kind: kind}
	}
	all := []acp.PermissionOption{opt("always", acp.PermissionOptionKindAllowAlways), opt("no", acp.PermissionOptionKindRejectOnce),
		opt("once", acp.PermissionOptionKindAllowOnce), opt("never", acp.PermissionOptionKindRejectAlways)}
	for _, c := range []struct {
		policy  Permission
		options []acp.PermissionOption
		want    string // "" for cancelled
	}{
		{Allow, all, "once"},
		{Allow, all[:2], "always"},
		{Allow, []acp.PermissionOption{opt("no", acp.PermissionOptionKindRejectOnce)}, ""},
		{Deny, all, "no"},
		{Deny, []acp.PermissionOption{all[0], all[3]}, "never"},
		{Deny, all[:1], ""},
		{Allow, nil, ""},
	} {
		out := choosePermission(c.policy, c.options)
		got := ""
		if out.Selected != nil {
			got = string(out.Selected.OptionId)
		} else if out.Cancelled == nil {
			t.Errorf("%s %v: neither selected nor cancelled", c.policy, c.options)
		}
		if got != c.want {
			t.Errorf("%s %v: chose %q, want %q", c.policy, c.options, got, c.want)
		}
	}
}

func TestTurnText(t *testing.T) {
	var tt turnText
	tt.add("Let me look. ")
	tt.toolCall()
	tt.add("Found it: ")
	tt.add("42.")
	if got := tt.answer(); got != "Found it: 42." {
		t.Errorf("answer %q", got)
	}
	tt.toolCall() // the turn ended on a tool call: all it said
	if got := tt.answer(); got != "Let me look. Found it: 42." {
		t.Errorf("answer after a closing tool call %q", got)
	}
	tt.reset()
	if got := tt.answer(); got != "" {
		t.Errorf("answer after reset %q", got)
	}
	tt.add(strings.Repeat("é", 5*maxAnswer))
	if got := tt.answer(); len([]rune(got)) != maxAnswer+1 || len(got) > 60<<10 {
		t.Errorf("a long answer is %d characters, %d bytes", len([]rune(got)), len(got))
	}
}

func TestConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sk := nostr.GeneratePrivateKey()
	env := map[string]string{
		contract.EnvRelayURL: "ws://127.0.0.1:3600", contract.EnvChannel: "trial-1", contract.EnvPrivateKeyFile: write("key", sk+"\n"),
		contract.EnvSystemPromptFile: write("prompt.md", "You work.\n"), contract.EnvDeadline: "2026-11-30T12:00:00Z", contract.EnvWorkdir: dir,
		contract.EnvAgentID: "worker-1", "HOME": dir,
	}
	getenv := func(k string) string { return env[k] }
	c, err := ConfigFromEnv(getenv, []string{"goose", "acp"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Member.SecretKey != sk || c.Member.AgentID != "worker-1" || c.System != "You work.\n" || c.Permission != Allow || c.Home != dir || !slices.Equal(c.Command, []string{"goose", "acp"}) {
		t.Errorf("config %+v", c)
	}
	env[EnvPermission] = "Deny"
	if c, err := ConfigFromEnv(getenv, []string{"goose"}); err != nil || c.Permission != Deny {
		t.Errorf("deny: %v %v", c.Permission, err)
	}
	env[EnvPermission] = "ask"
	env[contract.EnvChannel] = ""
	_, err = ConfigFromEnv(getenv, nil)
	for _, want := range []string{"TROUPE_CHANNEL is not set", `TROUPE_ACP_PERMISSION="ask" is neither allow nor deny`, "troupe acp -- COMMAND"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), sk) {
		t.Error("the error shows the key")
	}
	got := contract.HostedEnv([]string{"A=1", contract.EnvPrivateKeyFile + "=/run/key", "B=2"})
	if !slices.Equal(got, []string{"A=1", "B=2"}) {
		t.Errorf("child env %q", got)
	}
}

func TestReadLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.txt")
	os.WriteFile(p, []byte("a\nb\nc\nd"), 0o644)
	ptr := func(n int) *int { return &n }
	for _, c := range []struct {
		line, limit *int
		want        string
	}{
		{nil, nil, "a\nb\nc\nd"},
		{ptr(2), nil, "b\nc\nd"},
		{ptr(2), ptr(2), "b\nc\n"},
		{nil, ptr(1), "a\n"},
		{ptr(9), nil, ""},
		{ptr(0), ptr(0), "a\nb\nc\nd"},
	} {
		got, err := readLines(p, c.line, c.limit)
		if err != nil || got != c.want {
			t.Errorf("line %v limit %v: %q, %v; want %q", c.line, c.limit, got, err, c.want)
		}
	}
	if _, err := readLines(filepath.Dir(p), nil, nil); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a folder read: %v", err)
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{limit: 5}
	tb.Write([]byte("abc"))
	if out, cut := tb.Output(); out != "abc" || cut {
		t.Errorf("%q %v", out, cut)
	}
	for range 100 {
		tb.Write([]byte("xy"))
	}
	tb.Write([]byte("éz"))
	if out, cut := tb.Output(); out != "xyéz" || !cut {
		t.Errorf("%q %v: want the tail, cut after a whole character", out, cut)
	}
	if len(tb.buf) > 2*tb.limit+3 {
		t.Errorf("the buffer holds %d bytes for a limit of %d", len(tb.buf), tb.limit)
	}
}

func TestCheckFrame(t *testing.T) {
	for line, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                    "",
		`{"jsonrpc":"2.0","method":"session/update","params":{}}`: "",
		`{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file"}`: "",
		"  \r":                     "",
		`Loading...`:               "not a JSON object",
		`[1,2]`:                    "not a JSON object",
		`{"id":1,"result":{}}`:     "not JSON-RPC 2.0",
		`{"jsonrpc":"1.0","id":1}`: "not JSON-RPC 2.0",
		`{"jsonrpc":"2.0"}`:        "neither a request",
		`{"jsonrpc":"2.0","id":1,"result":{}} {"jsonrpc":"2.0","id":2}`: "not a JSON object",
	} {
		err := checkFrame([]byte(line))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
}

// FuzzFrameReader: whatever the child writes, the reader passes it on
// byte for byte, however it is split, and reports a break exactly when a
// complete line fails checkFrame (or a line outgrows maxFrame), once.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n"), uint8(3))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1}\nnot json\n"), uint8(1))
	f.Add([]byte("\n\n{\"jsonrpc\":\"2.0\",\"method\":\"m\"}"), uint8(7))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"é\"}\r\n"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		breaks := 0
		var got *ProtocolError
		fr := &frameReader{r: iotest.OneByteReader(bytes.NewReader(data)), onBreak: func(e *ProtocolError) { breaks++; got = e }}
		if split%2 == 0 {
			fr.r = bytes.NewReader(data)
		}
		out, err := io.ReadAll(fr)
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("passed on %q, %v; want %q", out, err, data)
		}
		wantBreak := false
		lines := bytes.Split(data, []byte("\n"))
		for _, l := range lines[:len(lines)-1] { // the last has no end yet
			if checkFrame(l) != nil {
				wantBreak = true
				break
			}
		}
		if breaks > 1 || (breaks == 1) != wantBreak {
			t.Fatalf("%d breaks (%v) for %q; want a break: %v", breaks, got, data, wantBreak)
		}
	})
}

// The task's MCP servers reach the ACP agent's session in ACP's form, those
// over HTTP or SSE only when the agent takes them; a server named as the
// team tools are is left out.
func TestTaskServers(t *testing.T) {
	var logs bytes.Buffer
	c := &child{log: slog.New(slog.NewTextHandler(&logs, nil))}
	task := []contract.MCPServer{
		{Name: "local", Transport: contract.TransportStdio, Command: "/bin/srv", Args: []string{"-v"}},
		{Name: "web", Transport: contract.TransportStreamableHTTP, URL: "http://mcp:8000/mcp"},
		{Name: "events", Transport: contract.TransportSSE, URL: "http://mcp:8000/sse"},
		{Name: "troupe-team", Transport: contract.TransportStdio, Command: "/bin/evil"},
	}
	names := func(servers []acp.McpServer) []string {
		var out []string
		for _, s := range servers {
			switch {
			case s.Stdio != nil:
				out = append(out, "stdio:"+s.Stdio.Name+":"+s.Stdio.Command+":"+strings.Join(s.Stdio.Args, ","))
			case s.Http != nil:
				out = append(out, "http:"+s.Http.Name+":"+s.Http.Url)
			case s.Sse != nil:
				out = append(out, "sse:"+s.Sse.Name+":"+s.Sse.Url)
			}
		}
		return out
	}
	if got := names(c.taskServers(task, acp.McpCapabilities{})); !slices.Equal(got, []string{"stdio:local:/bin/srv:-v"}) {
		t.Errorf("without capabilities: %q", got)
	}
	got := names(c.taskServers(task, acp.McpCapabilities{Http: true, Sse: true}))
	if want := []string{"stdio:local:/bin/srv:-v", "http:web:http://mcp:8000/mcp", "sse:events:http://mcp:8000/sse"}; !slices.Equal(got, want) {
		t.Errorf("with capabilities: %q, want %q", got, want)
	}
	for _, want := range []string{"mcp_server=troupe-team", "mcp_server=web transport=streamable-http", "the ACP agent does not take its transport"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
}
