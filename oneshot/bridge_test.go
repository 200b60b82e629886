package oneshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/member"
	"github.com/troupebench/troupe/relay"
	"github.com/troupebench/troupe/teamtools"
)

// The bridge's tests run it in process against a real relay; its agent is
// this test binary run again as a stand-in one-shot agent (runStandIn),
// and the team tools' MCP command is this binary's "mcp" mode: Pipe.
const (
	envMode = "ONESHOT_TEST_MODE"
	envLog  = "ONESHOT_TEST_ARGS" // a file the stand-in appends its arguments and prompt to
)

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
	if mode := os.Getenv(envMode); mode != "" {
		os.Exit(runStandIn(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// standInRun is what the stand-in records of one run.
type standInRun struct {
	Args   []string `json:"args"`
	Prompt string   `json:"prompt"`
}

// runStandIn is a one-shot agent: it takes its prompt from --prompt P,
// --prompt-file F or standard input, records the run, and does what its
// mode says.
func runStandIn(mode string, args []string) int {
	if slices.Contains(args, "--version") {
		if mode == "probe-fails" {
			fmt.Fprintln(os.Stderr, "standin: cannot load its configuration")
			return 3
		}
		fmt.Println("standin 1.0")
		return 0
	}
	var prompt string
	switch {
	case len(args) >= 2 && args[len(args)-2] == "--prompt":
		prompt = args[len(args)-1]
	case len(args) >= 2 && args[len(args)-2] == "--prompt-file":
		data, err := os.ReadFile(args[len(args)-1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		prompt = string(data)
	default:
		data, _ := io.ReadAll(os.Stdin)
		prompt = string(data)
	}
	if path := os.Getenv(envLog); path != "" {
		line, _ := json.Marshal(standInRun{Args: args, Prompt: prompt})
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			f.Write(append(line, '\n'))
			f.Close()
		}
	}
	last := prompt[strings.LastIndexByte(prompt, '\n')+1:]
	switch mode {
	case "echo":
		fmt.Println("some progress the agent prints")
		fmt.Println("echo: " + last)
	case "quick":
		fmt.Println("echo: " + last)
	case "env":
		fmt.Printf("config %s socket %s\n", os.Getenv(EnvMCPConfig), os.Getenv(EnvMCPSocket))
	case "fail":
		fmt.Fprintln(os.Stderr, "standin: unknown flag --typo")
		return 2
	case "fail-later":
		if strings.Contains(last, "fail") {
			fmt.Fprintln(os.Stderr, "standin: the model endpoint answered 500")
			return 1
		}
		fmt.Println("ok: " + last)
	case "mention":
		fmt.Println("@lead-1 please review; mail me at a@b.c, not @nobody")
	case "mcp":
		return standInMCP(args, last)
	case "hang":
		// A child that would outlive the run, and the run itself.
		exec.Command("sleep", "314.159").Start()
		fmt.Println("pid", os.Getpid())
		os.Stdout.Sync()
		time.Sleep(5 * time.Minute)
	}
	return 0
}

// standInMCP sends its answer through the team tools named in its
// --mcp-config file, as an MCP client does.
func standInMCP(args []string, last string) int {
	i := slices.Index(args, "--mcp-config")
	if i < 0 {
		fmt.Fprintln(os.Stderr, "no --mcp-config")
		return 1
	}
	data, err := os.ReadFile(args[i+1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := cfg.MCPServers[teamtools.ServerName]
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "standin"}, nil).Connect(ctx, &mcp.CommandTransport{Command: exec.Command(srv.Command, srv.Args...)}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		return 1
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"content": "via mcp: " + last, "mentions": []string{"lead"}}})
	if err != nil || res.IsError {
		fmt.Fprintln(os.Stderr, "send_message:", err, res)
		return 1
	}
	fmt.Println("this final text is not posted: the agent sent a message itself")
	return 0
}

// harness is a relay with a channel whose worker is a one-shot bridge.
type harness struct {
	t       testing.TB
	ch      *relay.Channel
	sub     *relay.Subscription
	cfg     Config
	runsLog string
	userPK  string
	pk      string // the bridge's
	leadPK  string
	logs    *syncbuf.Buffer
	cancel  context.CancelFunc
	done    chan error
}

type harnessOptions struct {
	// mode is the stand-in's (runStandIn); "direct" runs no bridge but a
	// contract agent that answers each mention itself, through the member
	// package: the baseline of the bridge's overhead.
	mode    string
	command []string // after the program; default: --prompt {prompt}
	flags   Flags
	system  string
	// notReady: the test expects the bridge to end before it is ready.
	notReady bool
	program  string // default: this test binary
	// unlimited lifts the relay's rate limit (100 messages a second per
	// connection), which a benchmark's turns outrun.
	unlimited bool
}

func newHarness(t testing.TB, opts harnessOptions) *harness {
	t.Helper()
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
	h := &harness{t: t, logs: &syncbuf.Buffer{}, done: make(chan error, 1)}
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
	if opts.program == "" {
		opts.program = os.Args[0]
	}
	if opts.command == nil {
		opts.command = []string{"--prompt", PhPrompt}
	}
	h.runsLog = filepath.Join(t.TempDir(), "runs.jsonl")
	systemFile := filepath.Join(t.TempDir(), "system-prompt.md")
	os.WriteFile(systemFile, []byte(opts.system), 0o600)
	h.cfg = Config{
		Member:     member.Config{RelayURL: r.URL(), Channel: channel, SecretKey: sk, PublicKey: h.pk, AgentID: "worker-1"},
		System:     opts.system,
		SystemFile: systemFile,
		Deadline:   time.Now().Add(time.Hour),
		Workdir:    t.TempDir(),
		Home:       t.TempDir(),
		Command:    append([]string{opts.program}, opts.command...),
		Flags:      opts.flags,
		// The race detector sleeps a second at exit, unless told not to.
		Env:        append(os.Environ(), envMode+"="+opts.mode, envLog+"="+h.runsLog, "GORACE=atexit_sleep_ms=0"),
		MCPCommand: []string{os.Args[0], "mcp"},
		Version:    "test",
	}
	if h.cfg.Flags.History == 0 && len(h.cfg.Flags.Resume) == 0 {
		h.cfg.Flags.History = teamtools.RecentShown
	}
	if h.cfg.Flags.ProbeTimeout == 0 {
		h.cfg.Flags.ProbeTimeout = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	log := slog.New(slog.NewJSONHandler(h.logs, nil)).With("agent", "worker-1")
	if opts.mode == "direct" {
		go func() { h.done <- runDirect(ctx, h.cfg.Member, log) }()
	} else {
		go func() { h.done <- New(h.cfg, log).Run(ctx) }()
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

// next waits for the next channel message from pk.
func (h *harness) next(pk string, within time.Duration) *nostr.Event {
	h.t.Helper()
	timer := time.After(within)
	for {
		select {
		case ev, ok := <-h.sub.Events():
			if !ok {
				h.t.Fatalf("the subscription ended: %v", h.sub.Err())
			}
			if ev.Kind == member.KindMessage && ev.PubKey == pk {
				return ev
			}
		case <-timer:
			h.t.Fatalf("no message within %s\n%s", within, h.logs.String())
			return nil
		}
	}
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

// runs are the stand-in's runs, as it recorded them.
func (h *harness) runs() []standInRun {
	h.t.Helper()
	data, _ := os.ReadFile(h.runsLog)
	var out []standInRun
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		var r standInRun
		if json.Unmarshal([]byte(line), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

func mentioned(ev *nostr.Event) []string {
	var out []string
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == "p" {
			out = append(out, tag[1])
		}
	}
	return out
}

// Each mention is one run; its last line of output goes back to whoever
// asked. With --resume, the first run starts the session (persona, team,
// no resume arguments) and the next continues it (resume arguments, only
// what the channel said since).
func TestEachMentionIsOneRunAndItsAnswerGoesBack(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "echo", system: "You are a careful implementer.",
		command: []string{"run", PhResume, "--prompt", PhPrompt}, flags: Flags{Resume: []string{"--continue", "--session", "last"}}})
	h.post("write hello.txt")
	ev := h.next(h.pk, 20*time.Second)
	if want := "some progress the agent prints\necho: write hello.txt"; ev.Content != want {
		t.Errorf("answer %q, want %q", ev.Content, want)
	}
	if p := mentioned(ev); !slices.Equal(p, []string{h.userPK}) {
		t.Errorf("the answer mentions %v, want the user who asked", p)
	}
	h.post("now add a newline")
	if ev := h.next(h.pk, 20*time.Second); ev.Content != "some progress the agent prints\necho: now add a newline" {
		t.Errorf("second answer %q", ev.Content)
	}
	runs := h.runs()
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	if !slices.Equal(runs[0].Args[:2], []string{"run", "--prompt"}) || !slices.Equal(runs[1].Args[:5], []string{"run", "--continue", "--session", "last", "--prompt"}) {
		t.Errorf("arguments %q then %q: want no resume arguments first, then all of them", runs[0].Args, runs[1].Args)
	}
	for _, want := range []string{"You are a careful implementer.", "You are worker-1 (role implementer, worker)", "lead-1 (lead)", "Message for you from user (user):\nwrite hello.txt"} {
		if !strings.Contains(runs[0].Prompt, want) {
			t.Errorf("the first prompt lacks %q:\n%s", want, runs[0].Prompt)
		}
	}
	if strings.Contains(runs[1].Prompt, "careful implementer") || strings.Contains(runs[1].Prompt, "How you take part") {
		t.Errorf("a continuing prompt re-sends the persona:\n%s", runs[1].Prompt)
	}
	if strings.Contains(runs[1].Prompt, "write hello.txt") {
		t.Errorf("a continuing prompt re-sends what its session saw:\n%s", runs[1].Prompt)
	}
}

// Without --resume, every run starts afresh: the persona, the team and
// the channel's recent messages (its own among them) in each prompt; the
// prompt on standard input or in a file, as the command says.
func TestWithoutResumeEveryPromptIsWhole(t *testing.T) {
	for name, command := range map[string][]string{
		"stdin": {"run"},
		"file":  {"run", "--prompt-file", PhPromptFile},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{mode: "echo", system: "PERSONA", command: command, flags: Flags{History: 3}})
			for _, msg := range []string{"one", "two"} {
				h.post(msg)
				h.next(h.pk, 20*time.Second)
			}
			runs := h.runs()
			if len(runs) != 2 {
				t.Fatalf("%d runs", len(runs))
			}
			p := runs[1].Prompt
			for _, want := range []string{"PERSONA", "How you take part", "Recent messages in the channel", "user (user): one", "you, worker-1 (implementer): some progress the agent prints\necho: one", "Message for you from user (user):\ntwo"} {
				if !strings.Contains(p, want) {
					t.Errorf("the second prompt lacks %q:\n%s", want, p)
				}
			}
			if name == "file" {
				if _, err := os.Stat(runs[1].Args[len(runs[1].Args)-1]); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the prompt file outlives its run: %v", err)
				}
			}
		})
	}
}

// {system_file}: the agent takes the persona apart; the prompt leaves it out.
func TestSystemFileLeavesThePersonaOutOfThePrompt(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "echo", system: "PERSONA", command: []string{"--system-prompt-file", PhSystemFile, "--prompt", PhPrompt}})
	h.post("go")
	h.next(h.pk, 20*time.Second)
	runs := h.runs()
	if len(runs) != 1 || runs[0].Args[1] != h.cfg.SystemFile || strings.Contains(runs[0].Prompt, "PERSONA") {
		t.Errorf("runs %+v: want the persona's file as an argument and not in the prompt", runs)
	}
}

// An answer that names teammates with @id wakes them too; names that are
// no teammate's are left alone.
func TestAnswerWakesTheTeammatesItNames(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "mention"})
	h.post("review please")
	ev := h.next(h.pk, 20*time.Second)
	if p := mentioned(ev); !slices.Equal(p, []string{h.userPK, h.leadPK}) {
		t.Errorf("mentions %v, want the user then lead-1", p)
	}
}

// The team tools reach the agent over MCP from {mcp_config}; an agent that
// sent a message itself has no answer posted for it.
func TestTeamToolsOverMCP(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "mcp", command: []string{"--mcp-config", PhMCPConfig, "--prompt", PhPrompt}})
	h.post("tell the lead")
	ev := h.next(h.pk, 20*time.Second)
	if ev.Content != "via mcp: tell the lead" || !slices.Equal(mentioned(ev), []string{h.leadPK}) {
		t.Errorf("message %q to %v", ev.Content, mentioned(ev))
	}
	h.post("again")
	if ev := h.next(h.pk, 20*time.Second); ev.Content != "via mcp: again" {
		t.Errorf("second message %q: the final text was posted as well", ev.Content)
	}
}

// The team tools' socket and config file, as placeholders and in the
// agent's environment, for agents that read their MCP servers from a
// configuration file of their own.
func TestMCPSocketAndConfigInTheEnvironment(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "env", command: []string{"--socket={mcp_socket}", "--prompt", PhPrompt}})
	h.post("where are the tools?")
	ev := h.next(h.pk, 20*time.Second)
	runs := h.runs()
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	socket := strings.TrimPrefix(runs[0].Args[0], "--socket=")
	if info, err := os.Stat(socket); err != nil || info.Mode().Type() != os.ModeSocket {
		t.Errorf("{mcp_socket} = %q: %v", socket, err)
	}
	config, _, _ := strings.Cut(strings.TrimPrefix(ev.Content, "config "), " socket ")
	if data, err := os.ReadFile(config); err != nil || !strings.Contains(string(data), socket) || !strings.HasSuffix(ev.Content, " socket "+socket) {
		t.Errorf("the agent's environment says %q; config %s: %v", ev.Content, data, err)
	}
}

// An agent that cannot start never joins the channel: Run returns a
// CannotWorkError at once, saying why.
func TestAnAgentThatCannotStartIsNeverReady(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	for name, tc := range map[string]struct {
		opts harnessOptions
		want string
	}{
		"missing":        {harnessOptions{program: "/opt/nowhere/agnet"}, "/opt/nowhere/agnet: does not exist"},
		"not on PATH":    {harnessOptions{program: "agnet-typo"}, "agnet-typo is not found in the agent's PATH"},
		"relative":       {harnessOptions{program: "./dist/agent"}, "./dist/agent (a relative path, resolved against the working folder "},
		"not executable": {harnessOptions{program: notExec}, "is not executable (mode 0644)"},
		"probe fails":    {harnessOptions{mode: "probe-fails", flags: Flags{Probe: []string{"--version"}}}, "standin: cannot load its configuration"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.opts.notReady = true
			start := time.Now()
			h := newHarness(t, tc.opts)
			err := h.wait(15 * time.Second)
			var cw *contract.CannotWorkError
			if !errors.As(err, &cw) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v; want a CannotWorkError saying %q", err, tc.want)
			}
			if _, missing, _ := h.ch.Readiness(); !slices.Contains(missing, "worker-1") {
				t.Error("the member was ready although its agent cannot start")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("it took %s to give up", d)
			}
		})
	}
}

// A probe that passes lets the member join.
func TestAProbeThatPassesLetsTheMemberJoin(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "echo", flags: Flags{Probe: []string{"--version"}}})
	h.post("hi")
	if ev := h.next(h.pk, 20*time.Second); !strings.HasSuffix(ev.Content, "echo: hi") {
		t.Errorf("answer %q", ev.Content)
	}
}

// A failed first run: the agent never worked. It says so to whoever asked,
// quoting the agent, and Run ends with a CannotWorkError; a later failed
// run is reported and the member goes on.
func TestFailedRuns(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "fail"})
	h.post("start")
	ev := h.next(h.pk, 20*time.Second)
	if !strings.HasPrefix(ev.Content, "I cannot work: my first run failed:") || !strings.Contains(ev.Content, "exit status 2") || !strings.Contains(ev.Content, "standin: unknown flag --typo") {
		t.Errorf("report %q", ev.Content)
	}
	err := h.wait(10 * time.Second)
	var cw *contract.CannotWorkError
	if !errors.As(err, &cw) || !strings.Contains(err.Error(), "unknown flag --typo") {
		t.Errorf("Run: %v", err)
	}

	h = newHarness(t, harnessOptions{mode: "fail-later"})
	h.post("first")
	if ev := h.next(h.pk, 20*time.Second); ev.Content != "ok: first" {
		t.Fatalf("first answer %q", ev.Content)
	}
	h.post("now fail")
	if ev := h.next(h.pk, 20*time.Second); !strings.HasPrefix(ev.Content, "My run ended in an error:") || !strings.Contains(ev.Content, "the model endpoint answered 500") {
		t.Errorf("report %q", ev.Content)
	}
	h.post("and recover")
	if ev := h.next(h.pk, 20*time.Second); ev.Content != "ok: and recover" {
		t.Errorf("after a failed run: %q", ev.Content)
	}
}

// At the end (SIGTERM, the deadline) a running run is stopped, and what it
// left in the background with it.
func TestStopEndsTheRunAndItsChildren(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "hang"})
	h.post("work long")
	var pid int
	for end := time.Now().Add(20 * time.Second); pid == 0 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(h.logs.String(), "\n") {
			if strings.Contains(l, `"msg":"turn start"`) {
				out, _ := exec.Command("pgrep", "-f", "sleep 314.159").Output()
				if f := strings.Fields(string(out)); len(f) > 0 {
					pid, _ = strconv.Atoi(f[0])
				}
			}
		}
	}
	if pid == 0 {
		t.Fatal("the run's background child never started")
	}
	start := time.Now()
	h.cancel()
	if err := h.wait(10 * time.Second); err != nil {
		t.Errorf("Run: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stopping took %s", d)
	}
	for end := time.Now().Add(2 * time.Second); alive(pid) && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		t.Errorf("the run's background child %d outlived it", pid)
	}
}

// alive: the process exists and is no zombie.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	return i > 0 && len(data) > i+2 && data[i+2] != 'Z'
}

// runDirect is a contract agent without a bridge: it answers each mention
// with "echo: <its last line>" through the member package, as the
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

// A long channel does not stop a run whose prompt is an argument: the
// prompt is fitted to the 128 KiB Linux allows one (else the exec fails
// with E2BIG and the agent would pass for one that cannot work).
func TestALongChannelStillFitsTheCommandLine(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: "echo"})
	for i := range 30 {
		if _, err := h.ch.Post(t.Context(), "#"+strconv.Itoa(i)+" "+strings.Repeat("𝄞", 2000)); err != nil {
			t.Fatal(err)
		}
	}
	h.post("and now the task")
	if ev := h.next(h.pk, 20*time.Second); !strings.HasSuffix(ev.Content, "echo: and now the task") {
		t.Errorf("answer %q", ev.Content)
	}
	runs := h.runs()
	if len(runs) != 1 || len(runs[0].Prompt) > maxArgPrompt || !strings.Contains(runs[0].Prompt, "#29 ") || strings.Contains(runs[0].Prompt, "#0 ") {
		t.Errorf("%d runs; the prompt: %d bytes", len(runs), len(runs[0].Prompt))
	}
}
