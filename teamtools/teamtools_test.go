package teamtools

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/member"
)

// fakeChannel is the member as the team tools see it: a team, a history,
// and the messages sent.
type fakeChannel struct {
	mu      sync.Mutex
	team    member.Team
	history []*nostr.Event
	sent    []string
}

func (f *fakeChannel) Send(ctx context.Context, content string, mentions []string, extra ...nostr.Tag) (*nostr.Event, error) {
	if _, err := f.team.ResolveMentions(mentions); err != nil {
		return nil, err
	}
	line := content + " → " + strings.Join(mentions, ",")
	for _, tag := range extra {
		line += " [" + strings.Join(tag, "=") + "]"
	}
	f.mu.Lock()
	f.sent = append(f.sent, line)
	f.mu.Unlock()
	return &nostr.Event{Content: content, Tags: extra}, nil
}

func (f *fakeChannel) History() []*nostr.Event  { return f.history }
func (f *fakeChannel) Team() *member.Team       { return &f.team }
func (f *fakeChannel) Self() member.Participant { return f.team.Members[1] }

func toolText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out []string
	for _, c := range res.Content {
		out = append(out, c.(*mcp.TextContent).Text)
	}
	return strings.Join(out, "\n"), res.IsError
}

func TestTeamToolsAgainstAFake(t *testing.T) {
	pk := func(c string) string { return strings.Repeat(c, 64) }
	ch := &fakeChannel{team: member.Team{Members: []member.Participant{
		{Pubkey: pk("a"), ID: "lead-1", Role: "lead", Kind: "orchestrator"},
		{Pubkey: pk("b"), ID: "worker-1", Role: "implementer", Kind: "worker"},
		{Pubkey: pk("d"), ID: "user", Role: "user", Kind: "user"},
	}}}
	for i := range 50 {
		ch.history = append(ch.history, &nostr.Event{PubKey: pk("a"), Content: fmt.Sprintf("message %d", i)})
	}
	var notified []string
	srv := newTeamTools(ch, "test", func(ev *nostr.Event) { notified = append(notified, ev.Content) }, nil, func() error { return nil }, slog.New(slog.DiscardHandler))
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"list_team", "read_channel", "send_message"}) {
		t.Errorf("tools %v", names)
	}
	if out, failed := toolText(t, cs, "send_message", map[string]any{"content": "@lead-1 done", "mentions": []string{"lead"}}); out != "sent" || failed {
		t.Errorf("send_message: %q %v", out, failed)
	}
	if out, failed := toolText(t, cs, "send_message", map[string]any{"content": "hi", "mentions": []string{"ghost"}}); !failed || !strings.Contains(out, "unknown teammate ghost") {
		t.Errorf("send_message to a ghost: %q %v", out, failed)
	}
	if !slices.Equal(ch.sent, []string{"@lead-1 done → lead"}) || !slices.Equal(notified, []string{"@lead-1 done"}) {
		t.Errorf("sent %q, notified %q", ch.sent, notified)
	}
	out, _ := toolText(t, cs, "read_channel", map[string]any{})
	lines := strings.Split(out, "\n")
	if len(lines) != RecentShown || lines[0] != "lead-1 (lead): message 10" || lines[len(lines)-1] != "lead-1 (lead): message 49" {
		t.Errorf("read_channel: %d lines, %q … %q", len(lines), lines[0], lines[len(lines)-1])
	}
	if out, _ := toolText(t, cs, "read_channel", map[string]any{"limit": 2}); out != "lead-1 (lead): message 48\nlead-1 (lead): message 49" {
		t.Errorf("read_channel limit 2: %q", out)
	}
	if out, _ := toolText(t, cs, "list_team", map[string]any{}); out != "lead-1: role lead, orchestrator\nworker-1: role implementer, worker (you)\nuser: role user, user" {
		t.Errorf("list_team: %q", out)
	}
}

// envDial makes the test binary dial a socket and say whether it was
// served (TestSocketRefusesOtherUIDs).
const envDial = "TEAMTOOLS_TEST_DIAL"

// TestMain: the test binary is also `troupe mcp --socket PATH` (Pipe), as
// a host's agent starts it, and a dialer for TestSocketRefusesOtherUIDs.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "mcp" && os.Args[2] == "--socket" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		err := Pipe(ctx, os.Args[3], os.Stdin, os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "mcp:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if path := os.Getenv(envDial); path != "" {
		os.Exit(dialAndProbe(path))
	}
	os.Exit(m.Run())
}

func dialAndProbe(path string) int {
	conn, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("cannot dial:", err)
		return 0
	}
	defer conn.Close()
	fmt.Fprintln(conn, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil && line == "" {
		// Closed unread: EOF, or a reset when the request was still in
		// the server's buffer.
		fmt.Println("refused")
		return 0
	}
	fmt.Println("served:", line)
	return 1
}

// The team tools' socket serves this uid alone: another uid that reaches
// it (here through a folder opened on purpose) is refused.
func TestSocketRefusesOtherUIDs(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run a process as another uid")
	}
	// Folders another uid may reach: the test binary's copy, the socket's.
	open := func() string {
		dir, err := os.MkdirTemp("", "teamtools-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o777)
		return dir
	}
	bin := filepath.Join(open(), "teamtools.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	s := New(&fakeChannel{}, open(), "test", nil, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := filepath.Dir(s.Path())
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("the socket's folder: %v, %v", info, err)
	}
	// Opened on purpose, down to the socket: only the uid check is left.
	for _, p := range []string{dir, s.Path()} {
		os.Chmod(p, 0o777)
	}
	cmd := exec.CommandContext(t.Context(), bin)
	cmd.Env = append(os.Environ(), envDial+"="+s.Path())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "refused" {
		t.Errorf("another uid: %v: %s", err, out)
	}
	if !strings.Contains(logs.String(), "mcp connection refused: not this agent's uid") || !strings.Contains(logs.String(), `"uid":65534`) {
		t.Errorf("log: %s", logs.String())
	}
}

// TestForeignProcessesAreMarked: a process of the same uid but outside the
// bridge's own tree (another agent, when agents run as root) that uses the
// member's MCP socket is served, and what it sends carries the foreign
// sender tag naming it; the bridge's own agent's messages carry none.
func TestForeignProcessesAreMarked(t *testing.T) {
	pk := func(c string) string { return strings.Repeat(c, 64) }
	ch := &fakeChannel{team: member.Team{Members: []member.Participant{
		{Pubkey: pk("a"), ID: "lead-1", Role: "lead", Kind: "orchestrator"},
		{Pubkey: pk("b"), ID: "worker-1", Role: "implementer", Kind: "worker"},
	}}}
	var logs syncbuf.Buffer
	s := New(ch, t.TempDir(), "test", nil, slog.New(slog.NewJSONHandler(&logs, nil)))
	s.Joined()
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	send := func(tr mcp.Transport, content string) {
		t.Helper()
		cs, err := client.Connect(t.Context(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if out, failed := toolText(t, cs, "send_message", map[string]any{"content": content, "mentions": []string{"lead-1"}}); failed {
			t.Fatalf("send_message: %s", out)
		}
	}
	// The bridge's own process (its agent would be a child of it).
	conn, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	send(&mcp.IOTransport{Reader: conn, Writer: conn}, "from my agent")
	// Another tree: a process whose parent exited before it connected, so
	// that it is this test's descendant no more, speaking through pipes.
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `exec 3<&0; (sleep 0.5; exec "$0" mcp --socket "$1" <&3 3<&-) & exit 0`, os.Args[0], s.Path())
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	send(&mcp.IOTransport{Reader: outR, Writer: inW}, "from another agent")
	ch.mu.Lock()
	sent := slices.Clone(ch.sent)
	ch.mu.Unlock()
	if len(sent) != 2 || sent[0] != "from my agent → lead-1" ||
		!strings.HasPrefix(sent[1], "from another agent → lead-1 ["+member.TagForeignSender+"=pid ") || !strings.Contains(sent[1], "not a process of this member's agent") {
		t.Errorf("sent %q, want the second marked as a foreign process's", sent)
	}
	if !strings.Contains(logs.String(), "mcp connection from a process outside this member's agent") {
		t.Errorf("the bridge's log does not say so: %s", logs.String())
	}
}

// Before the host's member has joined the channel, a tool call is an error
// for the agent (never a read of a team being learnt); after, it is served.
func TestToolsServeOnceJoined(t *testing.T) {
	ch := &fakeChannel{team: member.Team{Members: []member.Participant{
		{Pubkey: strings.Repeat("a", 64), ID: "lead-1", Role: "lead", Kind: "orchestrator"},
		{Pubkey: strings.Repeat("b", 64), ID: "worker-1", Role: "implementer", Kind: "worker"},
	}}}
	s := New(ch, t.TempDir(), "test", nil, slog.New(slog.DiscardHandler))
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	conn, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if out, failed := toolText(t, cs, "list_team", map[string]any{}); !failed || !strings.Contains(out, "not joined yet") {
		t.Errorf("before Joined: %q %v", out, failed)
	}
	s.Joined()
	if out, failed := toolText(t, cs, "list_team", map[string]any{}); failed || !strings.HasPrefix(out, "lead-1: role lead") {
		t.Errorf("after Joined: %q %v", out, failed)
	}
}

func TestUnseen(t *testing.T) {
	ev := func(id, pk, content string) *nostr.Event { return &nostr.Event{ID: id, PubKey: pk, Content: content} }
	name := func(pk string) string { return pk + " (r)" }
	var history []*nostr.Event
	for i := range 50 {
		history = append(history, ev("e"+string(rune('A'+i)), "u", "m"+string(rune('A'+i))))
	}
	history = append(history, ev("mine", "me", "my own"), ev("trig", "u", "the mention"))
	seen := map[string]bool{}
	got := Unseen(history, seen, history[len(history)-1], "me", name)
	if len(got) != RecentShown || got[0] != "u (r): m"+string(rune('A'+10)) || got[len(got)-1] != "u (r): m"+string(rune('A'+49)) {
		t.Errorf("first: %d lines, %q … %q", len(got), got[0], got[len(got)-1])
	}
	if len(seen) != len(history) {
		t.Errorf("%d marked seen, want all %d", len(seen), len(history))
	}
	history = append(history, ev("new", "w", "news"), ev("trig2", "u", "again"))
	if got := Unseen(history, seen, history[len(history)-1], "me", name); !slices.Equal(got, []string{"w (r): news"}) {
		t.Errorf("second: %q", got)
	}
}
