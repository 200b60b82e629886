package acpbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/member"
	"github.com/troupebench/troupe/teamtools"
)

const (
	// stopMargin: the bridge stops this long before its deadline, as the
	// reference agent does.
	stopMargin = 2 * time.Second
	// sweepGrace is how long the bridge waits, when its child went, for
	// its own end before it reports the child's.
	sweepGrace = 500 * time.Millisecond
)

// ChildError is the ACP agent gone before the bridge stopped it: exited,
// or broke the protocol.
type ChildError struct {
	Err       error
	LastWords string // its last stderr lines
}

func (e *ChildError) Error() string {
	if e.LastWords == "" {
		return e.Err.Error() + "; it wrote nothing on stderr"
	}
	return e.Err.Error() + "; its last stderr lines:\n" + e.LastWords
}

func (e *ChildError) Unwrap() error { return e.Err }

// Bridge is one team member hosting an ACP agent. New, then Run.
type Bridge struct {
	cfg Config
	log *slog.Logger

	member   *member.Member
	team     *member.Team
	self     member.Participant
	reportTo string

	child   *child
	client  *client
	session acp.SessionId
	sent    atomic.Int64 // messages the agent sent through the team tools
	joined  bool         // the member is in the channel: it can report there

	inbox *member.Inbox

	// Of the turns goroutine alone.
	seen     map[string]bool // channel messages the session has seen
	prompted bool
}

// New prepares a bridge; it does no I/O.
func New(cfg Config, log *slog.Logger) *Bridge {
	b := &Bridge{cfg: cfg, log: log, inbox: member.NewInbox(), seen: map[string]bool{}}
	b.member = member.New(cfg.Member, log)
	b.member.OnMessage = b.receive
	return b
}

// Run starts the ACP agent, completes its handshake, joins the channel,
// and takes a turn per mention until ctx ends (SIGTERM) or the deadline
// is near; it returns nil then. An agent that cannot start or dies before
// its handshake is a *contract.CannotWorkError (the member never joined);
// one that goes later is reported in the channel and returned as a
// *ChildError. Its own goroutines, the child and the
// commands it ran have ended when it returns (the ACP SDK's readers end a
// moment later, with their pipes).
func (b *Bridge) Run(ctx context.Context) error {
	ctx, cancel := context.WithDeadline(ctx, b.cfg.Deadline.Add(-stopMargin))
	defer cancel()
	b.log.Info("start", "command", strings.Join(b.cfg.Command, " "), "deadline", b.cfg.Deadline.Format(time.RFC3339),
		"workdir", b.cfg.Workdir, "permission", string(b.cfg.Permission))
	// The agent starts and answers its handshake before the member joins
	// the channel: a member counts as ready once it follows the channel,
	// and one whose agent cannot start must never be (the trial then ends
	// as an infrastructure error, quoting this bridge's last words).
	env := b.cfg.Env
	if env == nil {
		env = contract.HostedEnv(os.Environ())
	}
	tools := teamtools.New(b.member, b.cfg.Home, b.cfg.Version, b.onSent, b.log)
	if err := tools.Open(ctx); err != nil {
		return err
	}
	defer tools.Close()
	terms := newTerminals(b.cfg.Workdir, env)
	defer terms.Close()
	b.client = &client{workdir: b.cfg.Workdir, policy: b.cfg.Permission, log: b.log, terms: terms}
	b.child = newChild(b.cfg.Command, env, b.cfg.Workdir, b.log)
	if err := b.child.start(b.client); err != nil {
		return &contract.CannotWorkError{Err: err}
	}
	defer b.child.stop()
	mcpCmd, err := b.mcpCommand(tools.Path())
	if err != nil {
		return err
	}
	b.session, err = b.child.open(ctx, b.cfg.Version, b.cfg.Workdir, mcpCmd, b.cfg.TaskMCP)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return b.childFailed(ctx, err)
	}
	if err := b.member.Open(ctx); err != nil {
		return fmt.Errorf("connect to the relay %s: %w", b.cfg.Member.RelayURL, err)
	}
	defer b.member.Close(context.WithoutCancel(ctx))
	tools.Joined()
	b.joined = true
	b.team, b.self, b.reportTo, b.log = b.member.Team(), b.member.Self(), b.member.ReportTo(), b.member.Log()

	turnsCtx, stopTurns := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { b.turns(turnsCtx) })
	select {
	case <-ctx.Done():
	case <-b.member.Done():
	case <-b.child.Gone():
		// The sweep that ends a trial TERMs every process of the
		// container at once: the child may go a moment before the bridge
		// hears of its own end, which is no failure to report.
		select {
		case <-ctx.Done():
		case <-time.After(sweepGrace):
		}
	}
	stopTurns()
	wg.Wait()
	if ctx.Err() == nil && b.child.isGone() {
		return b.childFailed(ctx, b.child.Why())
	}
	b.log.Info("stop", "reason", context.Cause(ctx).Error())
	if err := b.member.Err(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// mcpCommand is the team tools' MCP server as the child starts it.
func (b *Bridge) mcpCommand(socket string) (acp.McpServer, error) {
	argv := b.cfg.MCPCommand
	if len(argv) == 0 {
		self, err := os.Executable()
		if err != nil {
			return acp.McpServer{}, fmt.Errorf("find troupe's own binary for the MCP server: %w", err)
		}
		argv = []string{self, "mcp"}
	}
	args := append(append([]string{}, argv[1:]...), "--socket", socket)
	return acp.McpServer{Stdio: &acp.McpServerStdio{Name: teamtools.ServerName, Command: argv[0], Args: args, Env: []acp.EnvVariable{}}}, nil
}

// childFailed reports the child's end in the channel and returns it.
func (b *Bridge) childFailed(ctx context.Context, err error) error {
	ce := &ChildError{Err: err, LastWords: b.child.LastWords()}
	b.log.Error("giving up", "err", err.Error(), "last_words", clip.Tail(ce.LastWords, 2000))
	if !b.joined {
		// Not in the channel yet, and never to be: the agent cannot work.
		// The trial quotes the error.
		return &contract.CannotWorkError{Err: ce}
	}
	what := err.Error()
	if last := lastLine(ce.LastWords); last != "" {
		what += "; its last words: " + clip.Tail(last, 500)
	}
	b.report(ctx, "I cannot continue: "+what+".")
	return ce
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// report tells the orchestrator (or the user, when this member is the
// orchestrator) what went wrong.
func (b *Bridge) report(ctx context.Context, msg string) {
	to := b.reportTo
	if _, err := b.member.Send(context.WithoutCancel(ctx), "@"+to+" "+msg, []string{to}); err != nil {
		b.log.Error("could not report the failure", "err", err.Error())
	}
}

// receive queues a turn when a channel message mentions this member.
func (b *Bridge) receive(ev *nostr.Event) {
	if b.member.Mentions(ev) {
		b.inbox.Push(ev)
	}
}

func (b *Bridge) onSent(*nostr.Event) { b.sent.Add(1) }

// turns takes queued mentions one at a time.
func (b *Bridge) turns(ctx context.Context) {
	for {
		ev, ok := b.inbox.Next(ctx)
		if !ok {
			return
		}
		b.turn(ctx, ev)
		if ctx.Err() != nil || b.child.isGone() {
			return
		}
	}
}

// turn prompts the agent with one mention and, when the agent sent
// nothing itself, posts its answer to whoever mentioned it.
func (b *Bridge) turn(ctx context.Context, trigger *nostr.Event) {
	start := time.Now()
	from := b.team.Name(trigger.PubKey)
	b.log.Info("turn start", "from", from, "event", trigger.ID)
	in := turnInput{
		First: !b.prompted, System: b.cfg.System, Self: b.self, Team: b.team.Describe(),
		Recent: teamtools.Unseen(b.member.History(), b.seen, trigger, b.self.Pubkey, b.team.Name),
		From:   from, Message: trigger.Content, TimeLeft: time.Until(b.cfg.Deadline), Workdir: b.cfg.Workdir,
	}
	b.prompted = true
	b.client.text.reset()
	sentBefore := b.sent.Load()
	resp, err := b.child.prompt(ctx, b.session, buildPrompt(in))
	sent := b.sent.Load() > sentBefore
	text := b.client.text.answer()
	attrs := []any{"stop_reason", string(resp.StopReason), "sent", sent, "duration", time.Since(start).Round(time.Millisecond).String(), "answer", clip.Head(text, 300)}
	if u := resp.Usage; u != nil {
		attrs = append(attrs, "input_tokens", u.InputTokens, "output_tokens", u.OutputTokens, "total_tokens", u.TotalTokens)
	}
	if err != nil {
		attrs = append(attrs, "err", err.Error())
	}
	b.log.Info("turn end", attrs...)
	if err != nil {
		if ctx.Err() != nil || b.child.isGone() {
			return // Run reports the child's end
		}
		b.answer(ctx, fmt.Sprintf("My turn ended in an error: %v", err), trigger)
		return
	}
	if answer, ok := answerFor(sent, resp.StopReason, text); ok {
		b.answer(ctx, answer, trigger)
	}
}

// answer posts for the agent to the author of trigger.
func (b *Bridge) answer(ctx context.Context, text string, trigger *nostr.Event) {
	to := trigger.PubKey
	if p := b.team.ByPubkey(to); p != nil {
		to = p.ID
	}
	if _, err := b.member.Send(ctx, text, []string{to}); err != nil {
		b.log.Error("could not post the agent's answer", "err", err.Error())
		return
	}
	b.log.Info("posted the agent's answer", "to", to)
}

// Main is `troupe acp -- COMMAND [ARGS...]`: it reads the stack contract
// from getenv, logs JSON lines to logs, and runs until ctx ends or the
// deadline is near.
func Main(ctx context.Context, getenv func(string) string, command []string, version string, logs io.Writer) error {
	cfg, err := ConfigFromEnv(getenv, command)
	if err != nil {
		return err
	}
	cfg.Version = version
	log := slog.New(slog.NewJSONHandler(logs, nil))
	if cfg.Member.AgentID != "" {
		log = log.With("agent", cfg.Member.AgentID)
	}
	// Teammates run as other uids in one group: what the agent creates
	// must be group-writable.
	syscall.Umask(0o002)
	return New(cfg, log).Run(ctx)
}
