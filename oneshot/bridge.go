package oneshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/member"
	"github.com/troupebench/troupe/teamtools"
)

// stopMargin: the bridge stops this long before its deadline, as the
// reference agent does.
const stopMargin = 2 * time.Second

// The variables the bridge adds to the agent's environment: the team
// tools' MCP configuration file ({mcp_config}) and socket ({mcp_socket}).
const (
	EnvMCPConfig = "TROUPE_MCP_CONFIG"
	EnvMCPSocket = "TROUPE_MCP_SOCKET"
)

// maxPosted bounds what the bridge posts of an answer: the relay refuses
// a message over 64 KiB.
const maxPosted = 48 << 10

// Bridge is one team member hosting a one-shot agent. New, then Run.
type Bridge struct {
	cfg  Config
	log  *slog.Logger
	tmpl template
	path string // the program, resolved
	env  []string

	member *member.Member
	team   *member.Team
	self   member.Participant
	sent   atomic.Int64 // messages the agent sent through the team tools

	inbox *member.Inbox

	// Of the turns goroutine alone.
	private   string // the bridge's private folder: prompt files, the MCP config
	mcpConfig string
	mcpLine   string
	mcpSocket string
	seen      map[string]bool
	session   bool // a run succeeded: the next one continues its session
	runs      int
}

// New prepares a bridge; it does no I/O.
func New(cfg Config, log *slog.Logger) *Bridge {
	b := &Bridge{cfg: cfg, log: log, inbox: member.NewInbox(), seen: map[string]bool{}}
	b.member = member.New(cfg.Member, log)
	b.member.OnMessage = b.receive
	return b
}

// Run checks that the agent can start, joins the channel, and runs the
// agent once per mention until ctx ends (SIGTERM) or the deadline is
// near; it returns nil then. An agent that cannot start, or whose first
// run fails, is a *contract.CannotWorkError: the trial ends as an
// infrastructure error, not as the team's failure.
func (b *Bridge) Run(ctx context.Context) error {
	ctx, cancel := context.WithDeadline(ctx, b.cfg.Deadline.Add(-stopMargin))
	defer cancel()
	b.log.Info("start", "command", strings.Join(b.cfg.Command, " "), "resume", strings.Join(b.cfg.Flags.Resume, " "),
		"history", b.cfg.Flags.History, "deadline", b.cfg.Deadline.Format(time.RFC3339), "workdir", b.cfg.Workdir)
	var err error
	if b.tmpl, err = parseTemplate(b.cfg.Command, b.cfg.Flags.Resume); err != nil {
		return &contract.CannotWorkError{Err: err}
	}
	b.env = b.cfg.Env
	if b.env == nil {
		b.env = contract.HostedEnv(os.Environ())
	}
	// The agent is checked before the member joins the channel: a member
	// counts as ready once it follows the channel, and one whose agent
	// cannot start must never be.
	if b.path, err = resolveProgram(b.cfg.Command[0], b.cfg.Workdir, b.env); err != nil {
		return &contract.CannotWorkError{Err: fmt.Errorf("the agent cannot start: %w", err)}
	}
	if err := b.probe(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &contract.CannotWorkError{Err: err}
	}
	if b.private, err = os.MkdirTemp(b.cfg.Home, ".troupe-cli-"); err != nil {
		return fmt.Errorf("make the bridge's private folder in %s: %w", b.cfg.Home, err)
	}
	defer os.RemoveAll(b.private)
	tools := teamtools.New(b.member, b.cfg.Home, b.cfg.Version, b.onSent, b.log)
	if err := tools.Open(ctx); err != nil {
		return err
	}
	defer tools.Close()
	if err := b.writeMCPConfig(tools.Path()); err != nil {
		return err
	}
	// For an agent that reads its MCP servers from its own configuration
	// file, which may name environment variables (crush, goose).
	b.env = slices.Concat(b.env, []string{EnvMCPConfig + "=" + b.mcpConfig, EnvMCPSocket + "=" + b.mcpSocket})
	if err := b.member.Open(ctx); err != nil {
		return fmt.Errorf("connect to the relay %s: %w", b.cfg.Member.RelayURL, err)
	}
	defer b.member.Close(context.WithoutCancel(ctx))
	tools.Joined()
	b.team, b.self, b.log = b.member.Team(), b.member.Self(), b.member.Log()

	var wg sync.WaitGroup
	turnsCtx, stopTurns := context.WithCancel(ctx)
	failed := make(chan error, 1)
	wg.Go(func() {
		if err := b.turns(turnsCtx); err != nil {
			failed <- err
		}
	})
	var end error
	select {
	case <-ctx.Done():
	case <-b.member.Done():
	case end = <-failed:
	}
	stopTurns()
	wg.Wait()
	if end != nil {
		b.log.Error("giving up", "err", end.Error())
		return end
	}
	b.log.Info("stop", "reason", fmt.Sprint(context.Cause(ctx)))
	if err := b.member.Err(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// probe runs the agent with the --probe arguments, when there are any:
// it must exit 0.
func (b *Bridge) probe(ctx context.Context) error {
	if len(b.cfg.Flags.Probe) == 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, b.cfg.Flags.ProbeTimeout)
	defer cancel()
	argv := append([]string{b.cfg.Command[0]}, b.cfg.Flags.Probe...)
	o := runOnce(pctx, b.path, argv, b.env, b.cfg.Workdir, nil, b.log.With("run", "probe"))
	b.log.Info("probe", "command", strings.Join(argv, " "), "failed", o.err != nil, "duration", o.took.Round(time.Millisecond).String(), "output", clip.Head(strings.TrimSpace(o.stdout), 300))
	switch {
	case o.stopped && ctx.Err() == nil:
		return fmt.Errorf("the agent's probe %q did not end within %s", strings.Join(argv, " "), b.cfg.Flags.ProbeTimeout)
	case o.err != nil:
		return fmt.Errorf("the agent's probe %q failed: %s", strings.Join(argv, " "), o.describe())
	}
	return nil
}

// writeMCPConfig writes the team tools' server as MCP clients' common
// configuration file, for {mcp_config}, and the line for {mcp_command}.
func (b *Bridge) writeMCPConfig(socket string) error {
	argv := b.cfg.MCPCommand
	if len(argv) == 0 {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find troupe's own binary for the MCP server: %w", err)
		}
		argv = []string{self, "mcp"}
	}
	b.mcpSocket = socket
	argv = append(append([]string{}, argv...), "--socket", socket)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	b.mcpLine = strings.Join(quoted, " ")
	servers := map[string]any{}
	for _, s := range b.cfg.TaskMCP {
		if s.Name == teamtools.ServerName {
			b.log.Warn("task MCP server left out: its name is the team tools'", "mcp_server", s.Name)
			continue
		}
		servers[s.Name] = commonMCPEntry(s)
	}
	servers[teamtools.ServerName] = map[string]any{"type": "stdio", "command": argv[0], "args": argv[1:]}
	data, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return err
	}
	b.mcpConfig = filepath.Join(b.private, "mcp.json")
	if err := os.WriteFile(b.mcpConfig, data, 0o600); err != nil {
		return fmt.Errorf("write the MCP configuration: %w", err)
	}
	return nil
}

// commonMCPEntry is a task's MCP server as MCP clients' common
// configuration names it: "http" for streamable HTTP, as Claude Code and
// Harbor's agents write it.
func commonMCPEntry(s contract.MCPServer) map[string]any {
	switch s.Transport {
	case contract.TransportStdio:
		return map[string]any{"type": "stdio", "command": s.Command, "args": append([]string{}, s.Args...)}
	case contract.TransportStreamableHTTP:
		return map[string]any{"type": "http", "url": s.URL}
	default:
		return map[string]any{"type": s.Transport, "url": s.URL}
	}
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// receive queues a turn when a channel message mentions this member.
func (b *Bridge) receive(ev *nostr.Event) {
	if b.member.Mentions(ev) {
		b.inbox.Push(ev)
	}
}

func (b *Bridge) onSent(*nostr.Event) { b.sent.Add(1) }

// turns runs the agent for queued mentions, one at a time; it returns
// the error that ends the member: a first run that failed.
func (b *Bridge) turns(ctx context.Context) error {
	for {
		ev, ok := b.inbox.Next(ctx)
		if !ok {
			return nil
		}
		if err := b.turn(ctx, ev); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// turn runs the agent once for a mention and, when it sent nothing
// itself, posts its answer to whoever mentioned it (and to the teammates
// the answer names). A failed first run ends the member: the agent never
// worked.
func (b *Bridge) turn(ctx context.Context, trigger *nostr.Event) error {
	b.runs++
	from := b.team.Name(trigger.PubKey)
	log := b.log.With("run", b.runs)
	continues := b.session && len(b.tmpl.resume) > 0
	in := turnInput{
		Whole: !continues, Self: b.self, Team: b.team.Describe(), Tools: b.tmpl.mcp,
		From: from, Message: trigger.Content, TimeLeft: time.Until(b.cfg.Deadline), Workdir: b.cfg.Workdir,
	}
	if !b.tmpl.systemApart {
		in.System = b.cfg.System
	}
	if len(b.tmpl.resume) > 0 {
		in.Context, in.Recent = unseenHeading, teamtools.Unseen(b.member.History(), b.seen, trigger, b.self.Pubkey, b.team.Name)
	} else {
		in.Context, in.Recent = recentHeading, recent(b.member.History(), b.cfg.Flags.History, trigger, b.self.Pubkey, b.team.Name)
	}
	prompt := buildPrompt(in)
	if b.tmpl.promptArg() {
		prompt = fitArgument(in)
	}
	v := turnValues{prompt: prompt, systemFile: b.cfg.SystemFile, mcpConfig: b.mcpConfig, mcpCommand: b.mcpLine, mcpSocket: b.mcpSocket,
		workdir: b.cfg.Workdir, continues: continues}
	var stdin io.Reader
	if b.tmpl.stdin {
		stdin = strings.NewReader(prompt)
	}
	if b.tmpl.hasPromptFile() {
		v.promptFile = filepath.Join(b.private, fmt.Sprintf("prompt-%d.md", b.runs))
		if err := os.WriteFile(v.promptFile, []byte(prompt), 0o600); err != nil {
			return fmt.Errorf("write the prompt file: %w", err)
		}
	}
	argv := b.tmpl.expand(v)
	log.Info("turn start", "from", from, "event", trigger.ID, "continues", continues, "prompt_bytes", len(prompt))
	sentBefore := b.sent.Load()
	o := runOnce(ctx, b.path, argv, b.env, b.cfg.Workdir, stdin, log)
	if v.promptFile != "" {
		os.Remove(v.promptFile)
	}
	sent := b.sent.Load() > sentBefore
	answer := strings.TrimSpace(o.stdout)
	attrs := []any{"duration", o.took.Round(time.Millisecond).String(), "sent", sent, "stopped", o.stopped, "answer", clip.Head(answer, 300)}
	if o.err != nil {
		attrs = append(attrs, "err", o.err.Error())
	}
	log.Info("turn end", attrs...)
	switch {
	case o.stopped:
		return nil // the deadline, or SIGTERM: the trial is ending
	case o.err != nil && b.runs == 1:
		what := o.describe()
		b.answer(ctx, "I cannot work: my first run failed: "+what+".", trigger, nil)
		return &contract.CannotWorkError{Err: fmt.Errorf("the agent's first run failed: %s", what)}
	case o.err != nil:
		b.answer(ctx, "My run ended in an error: "+o.describe()+".", trigger, nil)
		return nil
	}
	b.session = true
	switch {
	case sent:
	case answer == "":
		b.answer(ctx, "(I finished without an answer.)", trigger, nil)
	default:
		b.answer(ctx, clip.Head(answer, maxPosted), trigger, mentionsIn(answer, b.team))
	}
	return nil
}

func (t template) hasPromptFile() bool {
	for _, a := range t.argv[1:] {
		if strings.Contains(a, PhPromptFile) {
			return true
		}
	}
	return false
}

// answer posts for the agent to the author of trigger and to others.
func (b *Bridge) answer(ctx context.Context, text string, trigger *nostr.Event, others []string) {
	to := trigger.PubKey
	if p := b.team.ByPubkey(to); p != nil {
		to = p.ID
	}
	mentions := append([]string{to}, others...)
	if _, err := b.member.Send(context.WithoutCancel(ctx), text, mentions); err != nil {
		b.log.Error("could not post the agent's answer", "err", err.Error())
		return
	}
	b.log.Info("posted the agent's answer", "to", strings.Join(mentions, ","))
}

// Main is `troupe cli [FLAGS] -- COMMAND [ARGS...]`: it reads the stack
// contract from getenv, logs JSON lines to logs, and runs until ctx ends
// or the deadline is near.
func Main(ctx context.Context, getenv func(string) string, command []string, flags Flags, version string, logs io.Writer) error {
	cfg, err := ConfigFromEnv(getenv, command, flags)
	if err != nil {
		return &contract.CannotWorkError{Err: err}
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
