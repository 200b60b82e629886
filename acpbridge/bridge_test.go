package acpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/member"
	"github.com/troupebench/troupe/relay"
	"github.com/troupebench/troupe/teamtools"
)

// The bridge's tests run it in process against a real relay; its child is
// this test binary run again as a stand-in ACP agent (standin_test.go),
// and the team tools' MCP command is this binary's "mcp" mode: Pipe.
const envChild = "ACPBRIDGE_TEST_CHILD"

func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "mcp" && os.Args[2] == "--socket" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		err := teamtools.Pipe(ctx, os.Args[3], os.Stdin, os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "mcp:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(runStandIn(mode))
	}
	os.Exit(m.Run())
}

// harness is a relay with a channel whose worker is a bridge.
type harness struct {
	t       testing.TB
	ch      *relay.Channel
	sub     *relay.Subscription
	workdir string
	userPK  string
	pk      string // the bridge's
	leadPK  string
	logs    *syncbuf.Buffer
	cancel  context.CancelFunc
	done    chan error
	start   time.Time
}

type harnessOptions struct {
	// mode is the stand-in's (standin_test.go); "direct" runs no bridge
	// but a contract agent that answers each mention itself, through the
	// member package: the baseline of the bridge's overhead.
	mode       string
	deadline   time.Duration
	permission Permission
	system     string
	// unlimited lifts the relay's rate limit (100 messages a second per
	// connection), which a benchmark's turns outrun.
	unlimited bool
	// notReady: the test expects the bridge to end before it is ready.
	notReady bool
}

func newHarness(t testing.TB, opts harnessOptions) *harness {
	t.Helper()
	if opts.deadline == 0 {
		opts.deadline = time.Minute
	}
	r := relay.New()
	if opts.unlimited {
		r.EventRate = 0
	}
	if err := r.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("close relay: %v", err)
		}
	})
	h := &harness{t: t, logs: &syncbuf.Buffer{}, done: make(chan error, 1), start: time.Now()}
	userSK := nostr.GeneratePrivateKey()
	h.userPK, _ = nostr.GetPublicKey(userSK)
	sk := nostr.GeneratePrivateKey()
	h.pk, _ = nostr.GetPublicKey(sk)
	h.leadPK, _ = nostr.GetPublicKey(nostr.GeneratePrivateKey())
	channel := "trial-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var err error
	h.ch, err = r.OpenChannel(relay.ChannelConfig{
		ID: channel, UserPubkey: h.userPK, UserSecretKey: secret.New(userSK), Orchestrator: h.leadPK,
		Members: []relay.Member{{Pubkey: h.leadPK, ID: "lead-1", Role: "lead", Kind: "orchestrator"}, {Pubkey: h.pk, ID: "worker-1", Role: "implementer", Kind: "worker"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.sub, err = h.ch.Subscribe(false, 1024)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.sub.Close)
	h.workdir = t.TempDir()
	cfg := Config{
		Member:     member.Config{RelayURL: r.URL(), Channel: channel, SecretKey: sk, PublicKey: h.pk, AgentID: "worker-1"},
		System:     opts.system,
		Deadline:   time.Now().Add(opts.deadline),
		Workdir:    h.workdir,
		Home:       t.TempDir(),
		Permission: Allow,
		Command:    []string{os.Args[0]},
		Env:        append(os.Environ(), envChild+"="+opts.mode),
		MCPCommand: []string{os.Args[0], "mcp"},
		Version:    "test",
	}
	if opts.permission != "" {
		cfg.Permission = opts.permission
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	log := slog.New(slog.NewJSONHandler(h.logs, nil)).With("agent", "worker-1")
	if opts.mode == "direct" {
		go func() { h.done <- runDirect(ctx, cfg.Member, log) }()
	} else {
		go func() { h.done <- New(cfg, log).Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("the bridge did not stop within 10s of its context's end")
		}
		if t.Failed() {
			t.Logf("bridge log:\n%s", h.logs.String())
		}
	})
	if opts.notReady {
		return h
	}
	rctx, rcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer rcancel()
	for {
		_, missing, changed := h.ch.Readiness()
		if len(missing) == 1 && missing[0] == "lead-1" {
			break
		}
		select {
		case <-changed:
		case err := <-h.done:
			h.done <- err
			t.Fatalf("the bridge ended before it was ready: %v\n%s", err, h.logs.String())
		case <-rctx.Done():
			t.Fatalf("the bridge was not ready:\n%s", h.logs.String())
		}
	}
	return h
}

// post is a message from the user that mentions the bridge.
func (h *harness) post(content string) *nostr.Event {
	h.t.Helper()
	ev, err := h.ch.Post(h.t.Context(), content, h.pk)
	if err != nil {
		h.t.Fatal(err)
	}
	return ev
}

// next waits for the bridge's next channel message.
func (h *harness) next(within time.Duration) *nostr.Event {
	h.t.Helper()
	timer := time.After(within)
	for {
		select {
		case ev, ok := <-h.sub.Events():
			if !ok {
				h.t.Fatalf("the subscription ended: %v", h.sub.Err())
			}
			if ev.Kind == member.KindMessage && ev.PubKey == h.pk {
				return ev
			}
		case <-timer:
			h.t.Fatalf("no message from the bridge within %s\n%s", within, h.logs.String())
			return nil
		}
	}
}

// lines are the bridge's log lines whose msg is msg.
func (h *harness) lines(msg string) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(h.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// waitLines waits a moment for n log lines whose msg is msg, and returns
// those there are: a log line may follow the event the test saw.
func (h *harness) waitLines(msg string, n int) []map[string]any {
	for end := time.Now().Add(5 * time.Second); len(h.lines(msg)) < n && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	return h.lines(msg)
}

// wait waits for Run's end.
func (h *harness) wait(within time.Duration) error {
	h.t.Helper()
	select {
	case err := <-h.done:
		h.done <- err
		return err
	case <-time.After(within):
		h.t.Fatalf("the bridge still runs after %s\n%s", within, h.logs.String())
		return nil
	}
}

// runDirect is a contract agent without ACP: it answers each mention with
// "echo: <its last line>" through the member package, as the bridge's
// stand-in in "quick" mode does through the bridge.
func runDirect(ctx context.Context, cfg member.Config, log *slog.Logger) error {
	m := member.New(cfg, log)
	mentions := make(chan *nostr.Event, 64)
	m.OnMessage = func(ev *nostr.Event) {
		if m.Mentions(ev) {
			mentions <- ev
		}
	}
	if err := m.Open(ctx); err != nil {
		return err
	}
	defer m.Close(context.WithoutCancel(ctx))
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-mentions:
			last := ev.Content[strings.LastIndexByte(ev.Content, '\n')+1:]
			if _, err := m.Send(ctx, "echo: "+last, []string{m.Team().ByPubkey(ev.PubKey).ID}); err != nil {
				return err
			}
		}
	}
}

func mentioned(ev *nostr.Event) []string {
	var out []string
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "p" {
			out = append(out, t[1])
		}
	}
	return out
}

// A turn: the prompt carries the system prompt once, unseen channel
// messages, and the mention last; the agent's final text after its last
// tool call reaches whoever mentioned it; every update is a log line.
func TestTurnAnswersTheMentioner(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "echo", system: "You are a careful engineer."})
	if _, err := h.ch.Post(t.Context(), "a message for the lead only", h.leadPK); err != nil {
		t.Fatal(err)
	}
	h.post("first task\nplease do X")
	ev := h.next(10 * time.Second)
	if ev.Content != "echo: please do X" {
		t.Errorf("answer %q; want the text after the last tool call", ev.Content)
	}
	if got := mentioned(ev); len(got) != 1 || got[0] != h.userPK {
		t.Errorf("the answer mentions %v, want the user who asked", got)
	}
	h.post("second task")
	if ev := h.next(10 * time.Second); ev.Content != "echo: second task" {
		t.Errorf("second answer %q", ev.Content)
	}

	var first, second []string
	readJSON(t, filepath.Join(h.workdir, "prompt-1.json"), &first)
	readJSON(t, filepath.Join(h.workdir, "prompt-2.json"), &second)
	if len(first) != 4 || first[0] != "You are a careful engineer." || !strings.Contains(first[1], "You are worker-1 (role implementer, worker)") ||
		!strings.Contains(first[2], "a message for the lead only") || !strings.HasSuffix(first[3], "Message for you from user (user):\nfirst task\nplease do X") {
		t.Errorf("first prompt %q", first)
	}
	// The session has seen the system prompt, the lead's message, and its
	// own answer: the second prompt is the mention alone.
	if len(second) != 1 || !strings.HasSuffix(second[0], "second task") || strings.Contains(second[0], "careful engineer") {
		t.Errorf("second prompt %q", second)
	}
	kinds := map[string]int{}
	for _, l := range h.lines("session/update") {
		kinds[l["kind"].(string)]++
		if _, ok := l["update"].(map[string]any); !ok {
			t.Errorf("update logged as %v, want the JSON object", l["update"])
		}
	}
	if kinds["agent_message_chunk"] != 6 || kinds["agent_thought_chunk"] != 2 || kinds["tool_call"] != 2 || kinds["tool_call_update"] != 2 {
		t.Errorf("updates logged by kind: %v", kinds)
	}
	ends := h.waitLines("turn end", 2)
	if len(ends) != 2 || ends[0]["stop_reason"] != "end_turn" || ends[0]["input_tokens"] != float64(10) || ends[0]["sent"] != false {
		t.Errorf("turn ends logged as %v", ends)
	}
	if n := len(h.waitLines("posted the agent's answer", 2)); n != 2 {
		t.Errorf("%d answers posted, want 2", n)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// An agent that sends through the team tools is not answered for.
func TestSendingAgentIsNotAnsweredFor(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "send"})
	h.post("say hello")
	ev := h.next(10 * time.Second)
	if ev.Content != "hello from the child" || len(mentioned(ev)) != 1 || mentioned(ev)[0] != h.userPK {
		t.Errorf("message %q to %v", ev.Content, mentioned(ev))
	}
	// The turn's end says it sent; nothing else follows.
	if ends := h.waitLines("turn end", 1); len(ends) != 1 || ends[0]["sent"] != true {
		t.Fatalf("turn end logged as %v", ends)
	}
	select {
	case ev := <-h.sub.Events():
		if ev.PubKey == h.pk {
			t.Errorf("the bridge also posted %q", ev.Content)
		}
	case <-time.After(300 * time.Millisecond):
	}
}

// The client side of ACP: files, terminals (bounded output, kill,
// release), permission.
func TestClientSide(t *testing.T) {
	for _, c := range []struct {
		policy Permission
		want   string
	}{{Allow, "permission=yes"}, {Deny, "permission=no"}} {
		t.Run(string(c.policy), func(t *testing.T) {
			h := newHarness(t, harnessOptions{mode: "tools", permission: c.policy})
			h.post("use your tools")
			ev := h.next(15 * time.Second)
			for _, want := range []string{`read="two\n"`, c.want, "exit=3", `output="cdefghij"`, "truncated=true", "killed=SIGKILL", "released_error=true"} {
				if !strings.Contains(ev.Content, want) {
					t.Errorf("answer %q does not say %s", ev.Content, want)
				}
			}
			if data, err := os.ReadFile(filepath.Join(h.workdir, "sub", "note.txt")); string(data) != "one\ntwo\nthree\n" {
				t.Errorf("the file written for the agent: %q, %v", data, err)
			}
			perms := h.waitLines("session/request_permission", 1)
			if len(perms) != 1 || perms[0]["policy"] != string(c.policy) || perms[0]["title"] != "run a command" {
				t.Errorf("permission logged as %v", perms)
			}
		})
	}
}

// The team tools: list_team and read_channel show the team and the
// channel; an unknown mention is refused, naming the team.
func TestTeamTools(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "team"})
	h.post("who is here?")
	ev := h.next(10 * time.Second)
	for _, want := range []string{"lead-1: role lead, orchestrator", "worker-1: role implementer, worker (you)", "user: role user, user",
		"user (user): who is here?", "refused: unknown teammate nobody; mention ids or roles of the team"} {
		if !strings.Contains(ev.Content, want) {
			t.Errorf("answer %q does not say %q", ev.Content, want)
		}
	}
}

// A child that dies is reported in the channel, to the orchestrator, and
// the bridge exits with its last words.
func TestChildExitIsReported(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "crash"})
	h.post("go")
	ev := h.next(10 * time.Second)
	if !strings.HasPrefix(ev.Content, "@lead-1 I cannot continue: the ACP agent exited (exit status 3)") ||
		!strings.Contains(ev.Content, "panic: the stand-in crashed on purpose") || mentioned(ev)[0] != h.leadPK {
		t.Errorf("report %q to %v", ev.Content, mentioned(ev))
	}
	err := h.wait(5 * time.Second)
	ce, ok := errors.AsType[*ChildError](err)
	if !ok || !strings.Contains(ce.LastWords, "crashed on purpose") {
		t.Errorf("Run returned %v", err)
	}
}

// A child that writes something else than JSON-RPC on stdout broke the
// protocol: it is killed and reported.
func TestProtocolBreakIsReported(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "garbage"})
	h.post("go")
	ev := h.next(10 * time.Second)
	if !strings.Contains(ev.Content, "broke the protocol: not a JSON object") || !strings.Contains(ev.Content, "Loading model weights") {
		t.Errorf("report %q", ev.Content)
	}
	if _, ok := errors.AsType[*ProtocolError](h.wait(5 * time.Second)); !ok {
		t.Error("Run did not return the protocol error")
	}
}

// A child that dies before its handshake: the member never joins the
// channel (it is never ready), and Run says why at once, quoting the
// child, as an agent that cannot work.
func TestChildDeadAtStart(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "dead", notReady: true})
	err := h.wait(5 * time.Second)
	if _, ok := errors.AsType[*contract.CannotWorkError](err); !ok || !strings.Contains(err.Error(), "initialize: the ACP agent exited (exit status 2)") || !strings.Contains(err.Error(), "OPENAI_API_KEY is not set") {
		t.Errorf("Run: %v", err)
	}
	if _, missing, _ := h.ch.Readiness(); !slices.Contains(missing, "worker-1") {
		t.Error("the member was ready although its agent died before its handshake")
	}
}

// At the deadline the turn is cancelled (session/cancel), the child ends,
// and the bridge returns before the deadline.
func TestDeadlineCancelsTheTurn(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "hang", deadline: 5 * time.Second})
	deadline := h.start.Add(5 * time.Second)
	h.post("take forever")
	if err := h.wait(10 * time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if now := time.Now(); now.After(deadline) {
		t.Errorf("the bridge ended %s after its deadline", now.Sub(deadline))
	}
	if n := len(h.lines("session/cancel")); n != 1 {
		t.Errorf("session/cancel logged %d times", n)
	}
	if ends := h.lines("turn end"); len(ends) != 1 || ends[0]["stop_reason"] != "cancelled" {
		t.Errorf("turn end logged as %v", ends)
	}
	if !slices.ContainsFunc(h.lines("child stderr"), func(l map[string]any) bool { return l["line"] == "cancelled" }) {
		t.Errorf("the child did not see the cancel: %v", h.lines("child stderr"))
	}
	h.childGone()
}

// SIGTERM (the context's end) ends the turn, the child and its group at
// once.
func TestTermEndsTheChild(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "hang"})
	h.post("take forever")
	if len(h.waitLines("turn start", 1)) == 0 {
		t.Fatal("no turn started")
	}
	sent := time.Now()
	h.cancel()
	if err := h.wait(5 * time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(sent); took > 3*time.Second {
		t.Errorf("the bridge took %s to stop", took)
	}
	h.childGone()
}

func (h *harness) childGone() {
	h.t.Helper()
	data, err := os.ReadFile(filepath.Join(h.workdir, "child.pid"))
	if err != nil {
		h.t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(data))
	if !waitGone(pid, 2*time.Second) {
		h.t.Errorf("the child %d is still running", pid)
	}
}
