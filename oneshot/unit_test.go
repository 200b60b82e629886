package oneshot

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/member"
	"github.com/troupebench/troupe/teamtools"
)

func TestParseTemplate(t *testing.T) {
	for _, tc := range []struct {
		argv, resume []string
		err          string
		stdin, mcp   bool
	}{
		{argv: []string{"crush", "run", "{prompt}"}},
		{argv: []string{"claude", "-p", "{resume}", "--mcp-config={mcp_config}", "{prompt}"}, resume: []string{"--continue"}, mcp: true},
		{argv: []string{"agent", "--task-file", "{prompt_file}"}},
		{argv: []string{"agent"}, stdin: true},
		{argv: []string{"goose", "run", "--with-extension", "{mcp_command}", "-t", "{prompt}"}, mcp: true},
		{argv: []string{"codex", "exec", "-c", `mcp_servers.t.args=["mcp","--socket","{mcp_socket}"]`, "{prompt}"}, mcp: true},
		{argv: nil, err: "no agent to run"},
		{argv: []string{""}, err: "no agent to run"},
		{argv: []string{"{prompt}"}, err: "only its arguments may"},
		{argv: []string{"a", "{resume}", "{prompt}"}, err: "no --resume arguments"},
		{argv: []string{"a", "{prompt}"}, resume: []string{"--continue"}, err: "has no {resume} argument"},
		{argv: []string{"a", "--x={resume}"}, resume: []string{"-c"}, err: "an argument of its own"},
		{argv: []string{"a", "{resume}", "{resume}"}, resume: []string{"-c"}, err: "appears 2 times"},
		{argv: []string{"a", "{resume}"}, resume: []string{"{resume}"}, err: "cannot hold {resume}"},
	} {
		tmpl, err := parseTemplate(tc.argv, tc.resume)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q %q: %v, want %q", tc.argv, tc.resume, err, tc.err)
			}
			continue
		}
		if err != nil || tmpl.stdin != tc.stdin || tmpl.mcp != tc.mcp {
			t.Errorf("%q: %+v %v", tc.argv, tmpl, err)
		}
	}
}

func TestExpand(t *testing.T) {
	tmpl, err := parseTemplate([]string{"codex", "exec", "{resume}", "--cd", "{workdir}", "--system={system_file}", "{prompt}"}, []string{"resume", "--last"})
	if err != nil {
		t.Fatal(err)
	}
	v := turnValues{prompt: "do {workdir} it", systemFile: "/run/s.md", workdir: "/app"}
	if got := tmpl.expand(v); !slices.Equal(got, []string{"codex", "exec", "--cd", "/app", "--system=/run/s.md", "do {workdir} it"}) {
		t.Errorf("first run %q", got)
	}
	v.continues = true
	if got := tmpl.expand(v); !slices.Equal(got, []string{"codex", "exec", "resume", "--last", "--cd", "/app", "--system=/run/s.md", "do {workdir} it"}) {
		t.Errorf("continuing run %q", got)
	}
}

func TestMentionsIn(t *testing.T) {
	team := &member.Team{Members: []member.Participant{
		{Pubkey: strings.Repeat("a", 64), ID: "lead-1", Role: "lead", Kind: "orchestrator"},
		{Pubkey: strings.Repeat("b", 64), ID: "worker-1", Role: "implementer", Kind: "worker"},
		{Pubkey: strings.Repeat("c", 64), ID: "user", Role: "user", Kind: "user"},
	}}
	for text, want := range map[string][]string{
		"@lead-1 done.":                   {"lead-1"},
		"ask @implementer, then @lead-1.": {"implementer", "lead-1"},
		"mail a@lead-1.org or @ghost":     nil,
		"@worker-1 and again @worker-1":   {"worker-1"},
		"(@user) see @@lead-1":            {"user"},
		"DONE: all written":               nil,
		"@lead-1, @LEAD-1 and @lead-1--":  {"lead-1"},
	} {
		if got := mentionsIn(text, team); !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", text, got, want)
		}
	}
}

func TestCheckProgram(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A minimal ELF64 header for another machine: AArch64 (183) when this
	// one is x86-64, else x86-64 (62).
	other := uint16(183)
	if elfMachine() != 62 {
		other = 62
	}
	hdr := make([]byte, 64)
	copy(hdr, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(hdr[16:], 2) // ET_EXEC
	binary.LittleEndian.PutUint16(hdr[18:], other)
	binary.LittleEndian.PutUint32(hdr[20:], 1)
	binary.LittleEndian.PutUint16(hdr[52:], 64) // ehsize
	self, _ := os.Executable()
	for path, want := range map[string]string{
		write("script", []byte("#!/bin/sh\n"), 0o755): "",
		self:                               "",
		write("plain", []byte("x"), 0o644): "not executable",
		write("foreign", hdr, 0o755):       "is built for",
		dir:                                "is a folder",
		filepath.Join(dir, "missing"):      "does not exist",
	} {
		err := checkProgram(path)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
}

// A prompt passed as an argument fits one (Linux refuses an argument over
// 128 KiB): the oldest channel messages go first, then the message is
// cut; the result is valid UTF-8 and keeps the message's start.
func TestFitArgument(t *testing.T) {
	base := turnInput{Whole: true, System: "persona", Self: member.Participant{ID: "w-1", Role: "r", Kind: "worker"}, From: "user (user)", Workdir: "/app"}
	small := base
	small.Recent, small.Message = []string{"a: hi"}, "do it"
	if got := fitArgument(small); got != buildPrompt(small) {
		t.Errorf("a small prompt changed:\n%s", got)
	}
	many := base
	for i := range 200 {
		many.Recent = append(many.Recent, strings.Repeat("é", 1000)+" #"+strconv.Itoa(i))
	}
	many.Message = "the task"
	got := fitArgument(many)
	if len(got) > maxArgPrompt || !utf8.ValidString(got) || !strings.Contains(got, " #199") || strings.Contains(got, " #0\n") || !strings.HasSuffix(got, "the task") {
		t.Errorf("%d bytes; newest kept: %v, oldest dropped: %v", len(got), strings.Contains(got, " #199"), !strings.Contains(got, " #0\n"))
	}
	huge := base
	huge.Message = "START " + strings.Repeat("ü", 200<<10)
	got = fitArgument(huge)
	if len(got) > maxArgPrompt || !utf8.ValidString(got) || !strings.Contains(got, "START ") || !strings.Contains(got, cutMark) {
		t.Errorf("a huge message: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}

// FuzzTemplate: whatever command line and --resume arguments a stack
// gives, parseTemplate never panics; a template it accepts expands to the
// program unchanged, with no {resume} left, the --resume arguments only
// on a continuing run, and every {prompt} replaced by the prompt.
func FuzzTemplate(f *testing.F) {
	f.Add("crush\x00run\x00{prompt}", "", "hi")
	f.Add("claude\x00-p\x00{resume}\x00--mcp-config={mcp_config}\x00{prompt}", "--continue", "x {resume} y")
	f.Add("codex\x00exec\x00{resume}\x00{prompt_file}", "resume\x00--last", "")
	f.Add("a\x00--x={resume}", "-c", "p")
	f.Fuzz(func(t *testing.T, argv, resume, prompt string) {
		args := strings.Split(argv, "\x00")
		var res []string
		if resume != "" {
			res = strings.Split(resume, "\x00")
		}
		tmpl, err := parseTemplate(args, res)
		if err != nil {
			return
		}
		for _, continues := range []bool{false, true} {
			got := tmpl.expand(turnValues{prompt: prompt, continues: continues})
			if len(got) == 0 || got[0] != args[0] {
				t.Fatalf("%q expanded to %q", args, got)
			}
			want := len(args)
			if slices.Contains(args[1:], PhResume) {
				want--
				if continues {
					want += len(res)
				}
			}
			if len(got) != want {
				t.Fatalf("%q (resume %q, continues %v) expanded to %d arguments, want %d: %q", args, res, continues, len(got), want, got)
			}
		}
	})
}

// {mcp_config} holds the task's MCP servers beside the team tools, in the
// form MCP clients read ("http" for streamable HTTP); a task's server
// cannot take the team tools' name.
func TestMCPConfigHoldsTheTaskServers(t *testing.T) {
	var logs bytes.Buffer
	b := &Bridge{log: slog.New(slog.NewTextHandler(&logs, nil)), private: t.TempDir(), cfg: Config{
		MCPCommand: []string{"/opt/troupe/bin/troupe", "mcp"},
		TaskMCP: []contract.MCPServer{
			{Name: "local", Transport: contract.TransportStdio, Command: "/bin/srv", Args: []string{"-v"}},
			{Name: "web", Transport: contract.TransportStreamableHTTP, URL: "http://mcp:8000/mcp"},
			{Name: "events", Transport: contract.TransportSSE, URL: "http://mcp:8000/sse"},
			{Name: teamtools.ServerName, Transport: contract.TransportStdio, Command: "/bin/evil"},
		},
	}}
	if err := b.writeMCPConfig("/run/sock"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(b.mcpConfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(cfg.MCPServers)
	want := "map[events:map[type:sse url:http://mcp:8000/sse] local:map[args:[-v] command:/bin/srv type:stdio] " +
		"troupe-team:map[args:[mcp --socket /run/sock] command:/opt/troupe/bin/troupe type:stdio] web:map[type:http url:http://mcp:8000/mcp]]"
	if got != want {
		t.Errorf("mcp config:\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(logs.String(), "mcp_server=troupe-team") {
		t.Errorf("the left-out server is not logged: %s", logs.String())
	}
}
