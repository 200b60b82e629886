package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/internal/clip"
)

// Kinds and tags of the relay's channels.
const (
	kindMessage = 9
	kindMembers = 39002
	donePrefix  = "DONE:"
	historyKept = 200 // channel messages remembered
	historyShow = 40  // of which shown to the model each turn
	// stopMargin: the agent stops this long before its deadline;
	// callMargin: it starts no model call with less time than this left.
	stopMargin = 2 * time.Second
	callMargin = 3 * time.Second
)

// member is one participant, from the relay's member list.
type member struct {
	Pubkey, ID, Role, Kind string
}

type team struct {
	members []member
}

func (t *team) byPubkey(pk string) *member {
	for i := range t.members {
		if t.members[i].Pubkey == pk {
			return &t.members[i]
		}
	}
	return nil
}

func (t *team) describe() string {
	var parts []string
	for _, m := range t.members {
		parts = append(parts, fmt.Sprintf("%s (%s)", m.ID, m.Role))
	}
	return strings.Join(parts, ", ")
}

func (t *team) name(pk string) string {
	if m := t.byPubkey(pk); m != nil {
		return fmt.Sprintf("%s (%s)", m.ID, m.Role)
	}
	return pk[:min(12, len(pk))]
}

// Agent is one running agent.
type Agent struct {
	cfg  Config
	log  *slog.Logger
	llm  *llmClient
	team team
	self member
	// orchestrator is whom a failure report goes to: the orchestrator, or
	// the user when this agent is the orchestrator.
	reportTo string

	bg      sync.WaitGroup // the subscription drainers, one per connection
	mu      sync.Mutex
	conn    *relayConn
	history []*nostr.Event
	seen    map[string]bool
	queue   []*nostr.Event
	wake    chan struct{}
	idle    bool // set after an unrecoverable failure: no more turns
}

// New prepares an agent from its configuration; Run starts it.
func New(cfg Config, log *slog.Logger) *Agent {
	a := &Agent{cfg: cfg, log: log, seen: map[string]bool{}, wake: make(chan struct{}, 1)}
	a.llm = &llmClient{base: cfg.LLMBaseURL, token: cfg.LLMToken, model: cfg.Model, gen: cfg.Generation, http: &http.Client{}, sleep: sleepCtx}
	a.llm.onRetry = func(attempt, status int, wait time.Duration, err error) {
		a.log.Warn("model call will be retried", "attempt", attempt, "status", status, "wait", wait.String(), "err", err.Error())
	}
	return a
}

// Run runs the agent until ctx ends (SIGTERM) or its deadline is near,
// reconnecting to the relay if the connection drops. Every goroutine it
// starts has ended when it returns.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithDeadline(ctx, a.cfg.Deadline.Add(-stopMargin))
	defer cancel()
	a.log.Info("start", "deadline", a.cfg.Deadline.Format(time.RFC3339), "max_rounds", a.cfg.MaxRounds, "workdir", a.cfg.Workdir)
	// The first connection may fail on a relay that is not there yet, or
	// one lost while it is made: it is retried for a while too.
	first, cancelFirst := context.WithTimeout(ctx, firstConnectWindow)
	err := a.connectRetrying(first)
	cancelFirst()
	if err != nil {
		return fmt.Errorf("connect to the relay %s: %w", a.cfg.RelayURL, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { a.turns(ctx) })
	err = a.follow(ctx)
	cancel()
	wg.Wait()
	a.mu.Lock()
	if a.conn != nil {
		a.conn.Close()
	}
	a.mu.Unlock()
	a.bg.Wait()
	a.log.Info("stop", "reason", context.Cause(ctx).Error())
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// connect dials the relay, learns the team, and subscribes to the channel.
func (a *Agent) connect(ctx context.Context) error {
	conn, err := dialRelay(ctx, a.cfg.RelayURL, a.cfg.SecretKey, a.cfg.PublicKey)
	if err != nil {
		return err
	}
	// The member list is behind AUTH too: subscribing first gets the
	// challenge (NIP-42 is lazy here).
	sub, err := conn.subscribe(ctx, nostr.Filter{Kinds: []int{kindMessage}, Tags: nostr.TagMap{"h": {a.cfg.Channel}}, Limit: historyKept})
	if err != nil {
		conn.Close()
		return fmt.Errorf("subscribe to channel %s: %w", a.cfg.Channel, err)
	}
	if len(a.team.members) == 0 {
		if err := a.loadTeam(ctx, conn); err != nil {
			conn.Close()
			return err
		}
	}
	a.mu.Lock()
	if a.conn != nil {
		a.conn.Close() // the lost one: its reader has ended; release it
	}
	a.conn = conn
	a.mu.Unlock()
	a.log.Info("connected", "relay", a.cfg.RelayURL, "channel", a.cfg.Channel)
	a.bg.Go(func() { a.drain(sub) }) // ends when the connection does
	return nil
}

func (a *Agent) loadTeam(ctx context.Context, conn *relayConn) error {
	evs, err := conn.query(ctx, nostr.Filter{Kinds: []int{kindMembers}, Tags: nostr.TagMap{"d": {a.cfg.Channel}}})
	if err != nil {
		return fmt.Errorf("read the member list of %s: %w", a.cfg.Channel, err)
	}
	if len(evs) == 0 {
		return fmt.Errorf("channel %s has no member list", a.cfg.Channel)
	}
	for _, t := range evs[0].Tags {
		if len(t) >= 2 && t[0] == "p" {
			m := member{Pubkey: t[1]}
			if len(t) >= 4 {
				m.ID = t[3]
			}
			if len(t) >= 5 {
				m.Role = t[4]
			}
			if len(t) >= 6 {
				m.Kind = t[5]
			}
			a.team.members = append(a.team.members, m)
		}
	}
	me := a.team.byPubkey(a.cfg.PublicKey)
	if me == nil {
		return fmt.Errorf("this agent's key is not a member of channel %s", a.cfg.Channel)
	}
	a.self = *me
	if a.cfg.AgentID == "" { // Main names the logger when the id is given
		a.log = a.log.With("agent", me.ID)
	}
	// Failures are reported to the orchestrator, or, by the orchestrator,
	// to the user.
	a.reportTo = "user"
	for _, m := range a.team.members {
		if m.Kind == "orchestrator" && m.Pubkey != a.cfg.PublicKey {
			a.reportTo = m.ID
		}
	}
	a.log.Info("team", "self", me.ID, "role", me.Role, "kind", me.Kind, "members", a.team.describe())
	return nil
}

// drain moves a subscription's events into the agent's state.
func (a *Agent) drain(sub *subscription) {
	for ev := range sub.events {
		a.receive(ev)
	}
}

// receive remembers a channel message and queues a turn when it mentions
// this agent.
func (a *Agent) receive(ev *nostr.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen[ev.ID] {
		return
	}
	a.seen[ev.ID] = true
	a.history = append(a.history, ev)
	if len(a.history) > historyKept {
		a.history = slices.Delete(a.history, 0, len(a.history)-historyKept)
	}
	if ev.PubKey == a.cfg.PublicKey || a.idle || !ev.Tags.ContainsAny("p", []string{a.cfg.PublicKey}) {
		return
	}
	a.queue = append(a.queue, ev)
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// follow watches the connection and reconnects when it drops, until ctx ends.
func (a *Agent) follow(ctx context.Context) error {
	for {
		a.mu.Lock()
		done := a.conn.Done()
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
		}
		a.log.Warn("relay connection lost; reconnecting")
		// A moment first: the relay releases this key's identity when it
		// sees the old connection end, and an AUTH before that is refused
		// and counted as an identity conflict in the trial's result.
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return err
		}
		if err := a.connectRetrying(ctx); err != nil {
			return err
		}
	}
}

// firstConnectWindow is how long the first connection is retried.
const firstConnectWindow = 30 * time.Second

// connectRetrying connects, retrying with backoff until ctx ends; it
// returns the last failure then.
func (a *Agent) connectRetrying(ctx context.Context) error {
	backoff := 500 * time.Millisecond
	for {
		err := a.connect(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		a.log.Warn("connect failed", "err", err.Error(), "retry_in", backoff.String())
		if sleepCtx(ctx, backoff) != nil {
			return err
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// turns takes queued mentions one at a time.
func (a *Agent) turns(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
		for {
			a.mu.Lock()
			if len(a.queue) == 0 || a.idle {
				a.mu.Unlock()
				break
			}
			ev := a.queue[0]
			a.queue = a.queue[1:]
			a.mu.Unlock()
			a.turn(ctx, ev)
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// turn answers one mention: the model is called, and its tool calls run,
// until it answers without a tool call, runs out of rounds, or time runs out.
func (a *Agent) turn(ctx context.Context, trigger *nostr.Event) {
	start := time.Now()
	a.log.Info("turn start", "from", a.team.name(trigger.PubKey), "event", trigger.ID)
	msgs := a.conversation(trigger)
	rounds := 0
	sent, nudged := false, false
	defer func() {
		a.log.Info("turn end", "rounds", rounds, "duration", time.Since(start).Round(time.Millisecond).String())
	}()
	for rounds < a.cfg.MaxRounds {
		if dl, _ := ctx.Deadline(); time.Until(dl) < callMargin {
			a.log.Warn("turn stopped: the deadline is near")
			return
		}
		rounds++
		callStart := time.Now()
		resp, err := a.llm.chat(ctx, a.withTimeLeft(msgs, rounds), toolSpecs)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.fail(ctx, err)
			return
		}
		choice := resp.Choices[0]
		a.log.Info("model call", "round", rounds, "input_tokens", resp.Usage.PromptTokens, "output_tokens", resp.Usage.CompletionTokens,
			"tool_calls", len(choice.Message.ToolCalls), "latency", time.Since(callStart).Round(time.Millisecond).String())
		reply := choice.Message
		reply.Role = "assistant"
		msgs = append(msgs, reply)
		if len(reply.ToolCalls) == 0 {
			if reply.Content != nil {
				a.log.Info("final answer (not sent; only send_message reaches the channel)", "text", clip.Head(*reply.Content, 300))
			}
			// A turn that reached nobody, once: an answer in plain text is
			// a common slip, and an orchestrator's would leave the trial
			// waiting for its deadline.
			if sent || nudged {
				return
			}
			nudged = true
			msgs = append(msgs, message{Role: "user", Content: text(nudgeText)})
			continue
		}
		for _, tc := range reply.ToolCalls {
			sent = sent || tc.Function.Name == "send_message"
			t0 := time.Now()
			res := a.runTool(ctx, tc.Function.Name, tc.Function.Arguments)
			a.log.Info("tool call", "tool", tc.Function.Name, "args", clip.Head(tc.Function.Arguments, 300), "failed", res.failed, "duration", time.Since(t0).Round(time.Millisecond).String(), "result", clip.Head(res.content, 200))
			msgs = append(msgs, message{Role: "tool", ToolCallID: tc.ID, Content: text(res.content)})
		}
		shrinkToolResults(msgs, toolResultsBudget)
	}
	a.log.Warn("turn stopped: the maximum number of rounds was reached", "max_rounds", a.cfg.MaxRounds)
}

// nudgeText follows a turn's plain answer when the turn sent nothing.
const nudgeText = "Your answer was not sent: only the send_message tool reaches the channel. " +
	"If it was meant for a teammate or the user, send it now with send_message. " +
	"If the task is complete and you lead the team, send a message starting DONE: to user. " +
	"If there is nothing to send, answer in plain text again."

// toolResultsBudget bounds the tool results a turn resends with each call
// (about 32k tokens): without it a long turn outgrows the model's context
// and its cost grows with the square of its rounds.
const toolResultsBudget = 128 << 10

// shrinkToolResults shortens the oldest tool results, to their first lines,
// until all of them fit the budget; the newest are kept whole.
func shrinkToolResults(msgs []message, budget int) {
	total := 0
	for _, m := range msgs {
		if m.Role == "tool" && m.Content != nil {
			total += len(*m.Content)
		}
	}
	const keep = 512
	for i := range msgs {
		if total <= budget {
			return
		}
		m := &msgs[i]
		if m.Role != "tool" || m.Content == nil || len(*m.Content) <= keep+100 {
			continue
		}
		old := *m.Content
		short := old[:keep] + fmt.Sprintf("\n… (an older result, shortened from %d bytes to fit the context; run the tool again if you need it)", len(old))
		total -= len(old) - len(short)
		m.Content = text(short)
	}
}

// conversation builds a turn's messages: the system prompt, recent channel
// history, and the message that woke the agent, last.
func (a *Agent) conversation(trigger *nostr.Event) []message {
	msgs := []message{{Role: "system", Content: text(a.cfg.System)}}
	a.mu.Lock()
	var lines []string
	for _, ev := range a.history {
		if ev.ID == trigger.ID {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: %s", a.team.name(ev.PubKey), clip.Head(ev.Content, 2000)))
	}
	a.mu.Unlock()
	if len(lines) > historyShow {
		lines = lines[len(lines)-historyShow:]
	}
	if len(lines) > 0 {
		msgs = append(msgs, message{Role: "user", Content: text("Recent messages in the channel, oldest first:\n" + strings.Join(lines, "\n"))})
	}
	msgs = append(msgs, message{Role: "user", Content: text(fmt.Sprintf("Message for you from %s:\n%s", a.team.name(trigger.PubKey), trigger.Content))})
	return msgs
}

// withTimeLeft adds what the model must know about time to the system
// prompt of each call.
func (a *Agent) withTimeLeft(msgs []message, round int) []message {
	out := slices.Clone(msgs)
	left := time.Until(a.cfg.Deadline).Round(time.Second)
	note := fmt.Sprintf("%s\n\n## Now\n\nTime left before the deadline: %s. Model calls left in this turn: %d. Working folder: %s.",
		a.cfg.System, left, a.cfg.MaxRounds-round+1, a.cfg.Workdir)
	out[0] = message{Role: "system", Content: text(note)}
	return out
}

// send publishes a channel message with the mentions resolved to p tags.
func (a *Agent) send(ctx context.Context, content string, mentions []string) error {
	if strings.TrimSpace(content) == "" {
		return errors.New("the message is empty")
	}
	pks, err := a.team.resolveMentions(mentions)
	if err != nil {
		return err
	}
	ev := nostr.Event{Kind: kindMessage, CreatedAt: nostr.Now(), Content: content, Tags: nostr.Tags{{"h", a.cfg.Channel}}}
	for _, pk := range pks {
		ev.Tags = append(ev.Tags, nostr.Tag{"p", pk})
	}
	if err := ev.Sign(a.cfg.SecretKey); err != nil {
		return err
	}
	a.mu.Lock()
	conn := a.conn
	a.mu.Unlock()
	if err := conn.publish(ctx, ev); err != nil {
		return err
	}
	a.log.Info("sent", "event", ev.ID, "mentions", strings.Join(mentions, ","), "done", strings.HasPrefix(content, donePrefix))
	return nil
}

// fail reports an unrecoverable model failure in the channel, then stops
// taking turns: an idle agent is better than one spinning on errors.
func (a *Agent) fail(ctx context.Context, err error) {
	what := "my model call failed"
	if _, ok := errors.AsType[*errBudget](err); ok {
		what = "my budget is exhausted"
	}
	a.log.Error("giving up", "err", err.Error())
	a.mu.Lock()
	a.idle = true
	a.queue = nil
	a.mu.Unlock()
	to := a.reportTo
	msg := fmt.Sprintf("@%s I cannot continue: %s (%v). I will stay idle.", to, what, err)
	if serr := a.send(context.WithoutCancel(ctx), msg, []string{to}); serr != nil {
		a.log.Error("could not report the failure", "err", serr.Error())
	}
}
