package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/relay"
)

// The tests run the agent as a real process: the test binary started again
// with envChild set runs Main, as `troupe agent` does, against a real relay
// and a real gateway playing mock scenarios (testdata/scenarios).
const envChild = "TROUPE_AGENT_TEST_PROCESS"

// agentBinary is the executable the agents run: the test binary, copied
// where an unprivileged user may execute it when the tests run as root.
var agentBinary string

// childUID is the uid the agents run as: nobody when the tests run as root,
// since a trial's agents run as unprivileged users; else the tests' own.
var childUID = -1

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[len(os.Args)-1] == mcpStdioArg {
		os.Exit(runStdioMCPServer())
	}
	if os.Getenv(envChild) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := Main(ctx, os.Getenv, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "troupe agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	agentBinary = os.Args[0]
	if os.Getuid() == 0 {
		dir, err := os.MkdirTemp("", "troupe-agent-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		agentBinary = filepath.Join(dir, "agent.test")
		if err := copyFile(os.Args[0], agentBinary, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "copy the test binary:", err)
			return 1
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		childUID = 65534
	}
	return m.Run()
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// teamMember describes one agent of a test team.
type teamMember struct {
	id, role, kind string
	budget         manifest.Budget
}

var (
	lead   = teamMember{id: "lead-1", role: "lead", kind: "orchestrator"}
	worker = teamMember{id: "worker-1", role: "implementer", kind: "worker"}
	solo   = teamMember{id: "solo-1", role: "solo", kind: "orchestrator"}
)

// proc is one agent process.
type proc struct {
	id, pk string
	cmd    *exec.Cmd
	logs   *syncbuf.Buffer
	exited chan struct{}
	err    error // the process's exit, once exited is closed
	at     time.Time
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// harness is a relay, a gateway and a team of agent processes sharing one
// working folder.
type harness struct {
	t       *testing.T
	relay   *relay.Relay
	gw      *llm.Gateway
	trial   *llm.Trial
	ch      *relay.Channel
	workdir string
	agents  map[string]*proc
	trans   *syncbuf.Buffer
	start   time.Time
	proxy   *tcpProxy // between the agents and the relay, with opts.proxy
}

type harnessOptions struct {
	// endpoint is the agents' model endpoint: mock/<scenario> by default.
	scenario string
	// baseURL replaces the gateway as the agents' model API.
	baseURL  string
	token    string
	deadline time.Duration
	model    string
	system   string
	// proxy puts a TCP proxy between the agents and the relay, whose
	// connections h.proxy.cut drops.
	proxy bool
	// env is more of the agents' environment.
	env map[string]string
}

// newHarness starts the relay, the gateway and one process per member, and
// waits until every agent is ready on the channel.
func newHarness(t *testing.T, opts harnessOptions, members ...teamMember) *harness {
	t.Helper()
	ctx := t.Context()
	h := &harness{t: t, agents: map[string]*proc{}, trans: &syncbuf.Buffer{}, start: time.Now()}
	if opts.deadline == 0 {
		opts.deadline = time.Minute
	}
	if opts.system == "" {
		opts.system = "You are a member of a test team."
	}

	h.relay = relay.New()
	relayURL := ""
	if opts.proxy {
		h.proxy = startProxy(t)
		relayURL = "ws://" + h.proxy.ln.Addr().String()
		h.relay.AuthURLs = append(h.relay.AuthURLs, relayURL)
	}
	if err := h.relay.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if h.proxy != nil {
		h.proxy.setTarget(strings.TrimPrefix(h.relay.URL(), "ws://"))
	}
	relayURL = cmp.Or(relayURL, h.relay.URL())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.relay.Close(ctx); err != nil {
			t.Errorf("close relay: %v", err)
		}
	})
	h.gw = llm.New(nil)
	h.gw.Scenarios = os.DirFS("testdata/scenarios")
	if err := h.gw.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.gw.Close(ctx); err != nil {
			t.Errorf("close gateway: %v", err)
		}
	})

	endpoint := "mock/" + opts.scenario
	userSK := nostr.GeneratePrivateKey()
	userPK, _ := nostr.GetPublicKey(userSK)
	keys := map[string]string{}
	var relayMembers []relay.Member
	var specs []llm.AgentSpec
	orchestrator := ""
	for _, m := range members {
		sk := nostr.GeneratePrivateKey()
		pk, _ := nostr.GetPublicKey(sk)
		keys[m.id] = sk
		relayMembers = append(relayMembers, relay.Member{Pubkey: pk, ID: m.id, Role: m.role, Kind: m.kind})
		specs = append(specs, llm.AgentSpec{ID: m.id, Role: m.role, Kind: m.kind, Pubkey: pk, Endpoint: endpoint, Budget: m.budget})
		if m.kind == "orchestrator" {
			orchestrator = pk
		}
	}
	channel := "trial-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var err error
	h.ch, err = h.relay.OpenChannel(relay.ChannelConfig{
		ID: channel, Members: relayMembers, UserPubkey: userPK, UserSecretKey: secret.New(userSK),
		Orchestrator: orchestrator, Transcript: h.trans,
	})
	if err != nil {
		t.Fatal(err)
	}
	baseURL := opts.baseURL
	if baseURL == "" {
		h.trial, err = h.gw.OpenTrial(llm.TrialSpec{ID: channel, Channel: channel, UserPubkey: userPK, Agents: specs,
			Prices: map[string]manifest.Price{endpoint: {InputPerMillionUSD: 1, OutputPerMillionUSD: 2}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.trial.Close(context.Background()) })
		baseURL = h.gw.URL() + "/v1"
	}

	h.workdir = h.dir("work")
	deadline := time.Now().Add(opts.deadline)
	for _, m := range members {
		secrets := h.dir("secrets-" + m.id)
		token := opts.token
		if h.trial != nil {
			token = h.trial.Token(m.id).Reveal()
		}
		env := map[string]string{
			contract.EnvRelayURL:         relayURL,
			contract.EnvPrivateKeyFile:   h.file(secrets, "key", keys[m.id], 0o600),
			contract.EnvLLMTokenFile:     h.file(secrets, "token", token, 0o600),
			contract.EnvChannel:          channel,
			contract.EnvLLMBaseURL:       baseURL,
			contract.EnvModel:            cmp.Or(opts.model, m.id),
			contract.EnvSystemPromptFile: h.file(secrets, "prompt.md", opts.system, 0o644),
			contract.EnvMaxRounds:        "8",
			contract.EnvDeadline:         deadline.Format(time.RFC3339Nano),
			contract.EnvWorkdir:          h.workdir,
			contract.EnvAgentID:          m.id,
		}
		maps.Copy(env, opts.env)
		h.spawn(m.id, keys[m.id], env)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := h.ch.WaitReady(rctx); err != nil {
		h.dump()
		t.Fatalf("agents not ready: %v", err)
	}
	return h
}

// dir makes a folder the agents' user may use.
func (h *harness) dir(name string) string {
	h.t.Helper()
	base, err := os.MkdirTemp("", "troupe-agent-"+name+"-")
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { os.RemoveAll(base) })
	h.chown(base)
	return base
}

// file writes a file the agents' user owns.
func (h *harness) file(dir, name, content string, mode os.FileMode) string {
	h.t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		h.t.Fatal(err)
	}
	h.chown(p)
	return p
}

func (h *harness) chown(p string) {
	h.t.Helper()
	if childUID >= 0 {
		if err := os.Chown(p, childUID, childUID); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) spawn(id, sk string, env map[string]string) {
	h.t.Helper()
	pk, _ := nostr.GetPublicKey(sk)
	cmd := exec.Command(agentBinary)
	cmd.Env = []string{envChild + "=1", "PATH=" + os.Getenv("PATH"), "HOME=/"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &proc{id: id, pk: pk, cmd: cmd, logs: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr, cmd.Stdout = p.logs, p.logs
	if childUID >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(childUID), Gid: uint32(childUID)}}
	}
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start agent %s: %v", id, err)
	}
	go func() {
		p.err = cmd.Wait()
		p.at = time.Now()
		close(p.exited)
	}()
	h.agents[id] = p
	h.t.Cleanup(func() {
		if p.running() {
			cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			h.t.Errorf("agent %s ignored SIGTERM for 10s", id)
			cmd.Process.Kill()
			<-p.exited
		}
		if h.t.Failed() {
			h.t.Logf("logs of %s:\n%s", id, p.logs.String())
		}
	})
}

// dump logs what the agents said, for a failure's explanation.
func (h *harness) dump() {
	for id, p := range h.agents {
		h.t.Logf("logs of %s:\n%s", id, p.logs.String())
	}
	h.t.Logf("transcript:\n%s", h.trans.String())
}

// post gives the agents a message as the trial user, mentioning agent ids.
func (h *harness) post(content string, ids ...string) *nostr.Event {
	h.t.Helper()
	var pks []string
	for _, id := range ids {
		pks = append(pks, h.agents[id].pk)
	}
	ev, err := h.ch.Post(h.t.Context(), content, pks...)
	if err != nil {
		h.t.Fatal(err)
	}
	return ev
}

// waitDone waits for the orchestrator's DONE:.
func (h *harness) waitDone(within time.Duration) *nostr.Event {
	h.t.Helper()
	select {
	case <-h.ch.Done():
		return h.ch.DoneEvent()
	case <-time.After(within):
		h.dump()
		h.t.Fatalf("no DONE: from the orchestrator within %s", within)
		return nil
	}
}

// waitMessage waits for a channel message from an agent that contains text.
func (h *harness) waitMessage(from, text string, within time.Duration) *nostr.Event {
	h.t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		for _, ev := range h.ch.Events() {
			if ev.Kind == relay.KindChannelMessage && ev.PubKey == h.agents[from].pk && strings.Contains(ev.Content, text) {
				return ev
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.dump()
	h.t.Fatalf("no message from %s containing %q within %s", from, text, within)
	return nil
}

// messages returns the channel's messages in relay order.
func (h *harness) messages() []*nostr.Event {
	var out []*nostr.Event
	for _, ev := range h.ch.Events() {
		if ev.Kind == relay.KindChannelMessage {
			out = append(out, ev)
		}
	}
	return out
}

// logLines returns an agent's JSON log lines whose msg is msg.
func (h *harness) logLines(id, msg string) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(h.agents[id].logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func mentions(ev *nostr.Event) []string {
	var out []string
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "p" {
			out = append(out, t[1])
		}
	}
	return out
}

// waitExit asserts that an agent exits, by itself, with status 0.
func (h *harness) waitExit(id string, within time.Duration) *proc {
	h.t.Helper()
	p := h.agents[id]
	select {
	case <-p.exited:
	case <-time.After(within):
		h.dump()
		h.t.Fatalf("agent %s still running after %s", id, within)
	}
	if p.err != nil {
		h.t.Errorf("agent %s exited with %v:\n%s", id, p.err, p.logs.String())
	}
	return p
}

// processGone asserts that the pid written in the working folder's file is
// no longer running.
func (h *harness) processGone(pidFile string) {
	h.t.Helper()
	data, err := os.ReadFile(filepath.Join(h.workdir, pidFile))
	if err != nil {
		h.t.Fatalf("the shell command never ran: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		h.t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("process %d that the agent's shell started is still there (kill 0: %v)", pid, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits until the working folder holds a file.
func (h *harness) waitFile(name string, within time.Duration) {
	h.t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if data, err := os.ReadFile(filepath.Join(h.workdir, name)); err == nil && len(data) > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.dump()
	h.t.Fatalf("%s never appeared in the working folder", name)
}

// tcpProxy forwards TCP connections to a target, and can drop them all: a
// relay connection lost in the middle of a trial.
type tcpProxy struct {
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	target string
	conns  []net.Conn
}

func startProxy(t *testing.T) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) setTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

func (p *tcpProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(out, in); out.Close(); in.Close() })
		p.wg.Go(func() { io.Copy(in, out); in.Close(); out.Close() })
	}
}

// cut drops every connection made so far.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
