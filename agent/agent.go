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
	"github.com/troupebench/troupe/member"
)

const (
	historyShow = 40 // channel messages shown to the model each turn
	// stopMargin: the agent stops this long before its deadline;
	// callMargin: it starts no model call with less time than this left.
	stopMargin = 2 * time.Second
	callMargin = 3 * time.Second
)

// Agent is one running agent.
type Agent struct {
	cfg Config
	log *slog.Logger
	llm *llmClient
	// member is the agent's side of the channel: its relay connection,
	// the team, the channel's recent messages.
	member *member.Member
	team   *member.Team
	self   member.Participant
	// orchestrator is whom a failure report goes to: the orchestrator, or
	// the user when this agent is the orchestrator.
	reportTo string

	// inbox is closed after an unrecoverable failure: no more turns.
	inbox *member.Inbox
	// task are the task's MCP servers' tools; nil without any.
	task *taskTools
}

// New prepares an agent from its configuration; Run starts it.
func New(cfg Config, log *slog.Logger) *Agent {
	a := &Agent{cfg: cfg, log: log, inbox: member.NewInbox()}
	a.member = member.New(member.Config{RelayURL: cfg.RelayURL, Channel: cfg.Channel, SecretKey: cfg.SecretKey, PublicKey: cfg.PublicKey, AgentID: cfg.AgentID}, log)
	a.member.OnMessage = a.receive
	a.llm = &llmClient{base: cfg.LLMBaseURL, token: cfg.LLMToken, model: cfg.Model, gen: cfg.Generation, http: &http.Client{}}
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
	if err := a.member.Open(ctx); err != nil {
		return fmt.Errorf("connect to the relay %s: %w", a.cfg.RelayURL, err)
	}
	a.team, a.self, a.reportTo, a.log = a.member.Team(), a.member.Self(), a.member.ReportTo(), a.member.Log()
	if len(a.cfg.MCPServers) > 0 {
		a.task = connectTaskTools(ctx, a.cfg.MCPServers, a.log)
		defer a.task.close()
	}
	var wg sync.WaitGroup
	wg.Go(func() { a.turns(ctx) })
	err := a.member.Err() // following ends with ctx
	cancel()
	wg.Wait()
	// ctx has ended: the member is closed on what remains of it.
	if cerr := a.member.Close(context.WithoutCancel(ctx)); cerr != nil {
		a.log.Warn("close", "err", cerr.Error())
	}
	a.log.Info("stop", "reason", context.Cause(ctx).Error())
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// receive queues a turn when a channel message mentions this agent.
func (a *Agent) receive(ev *nostr.Event) {
	if a.member.Mentions(ev) {
		a.inbox.Push(ev)
	}
}

// turns takes queued mentions one at a time.
func (a *Agent) turns(ctx context.Context) {
	for {
		ev, ok := a.inbox.Next(ctx)
		if !ok {
			return
		}
		a.turn(ctx, ev)
		if ctx.Err() != nil {
			return
		}
	}
}

// turn answers one mention: the model is called, and its tool calls run,
// until it answers without a tool call, runs out of rounds, or time runs out.
func (a *Agent) turn(ctx context.Context, trigger *nostr.Event) {
	start := time.Now()
	a.log.Info("turn start", "from", a.team.Name(trigger.PubKey), "event", trigger.ID)
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
		resp, err := a.llm.chat(ctx, a.withTimeLeft(msgs, rounds), a.task.allSpecs())
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
	var lines []string
	for _, ev := range a.member.History() {
		if ev.ID == trigger.ID {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: %s", a.team.Name(ev.PubKey), clip.Head(ev.Content, 2000)))
	}
	if len(lines) > historyShow {
		lines = lines[len(lines)-historyShow:]
	}
	if len(lines) > 0 {
		msgs = append(msgs, message{Role: "user", Content: text("Recent messages in the channel, oldest first:\n" + strings.Join(lines, "\n"))})
	}
	msgs = append(msgs, message{Role: "user", Content: text(fmt.Sprintf("Message for you from %s:\n%s", a.team.Name(trigger.PubKey), trigger.Content))})
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
	_, err := a.member.Send(ctx, content, mentions)
	return err
}

// fail reports an unrecoverable model failure in the channel, then stops
// taking turns: an idle agent is better than one spinning on errors.
func (a *Agent) fail(ctx context.Context, err error) {
	if _, ended := errors.AsType[*errEnded](err); ended {
		// The trial is over: nobody is left to tell, and a message now
		// would only race the sweep into the transcript.
		a.log.Info("the trial has ended: no more model calls", "err", err.Error())
		a.inbox.Close()
		return
	}
	what := "my model call failed"
	if _, ok := errors.AsType[*errBudget](err); ok {
		what = "my budget is exhausted"
	}
	a.log.Error("giving up", "err", err.Error())
	a.inbox.Close()
	to := a.reportTo
	msg := fmt.Sprintf("@%s I cannot continue: %s (%v). I will stay idle.", to, what, err)
	if serr := a.send(context.WithoutCancel(ctx), msg, []string{to}); serr != nil {
		a.log.Error("could not report the failure", "err", serr.Error())
	}
}
