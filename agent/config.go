// Package agent is troupe's reference agent, run as `troupe agent` inside a
// trial container: a team member that talks on the relay, thinks with any
// OpenAI-compatible model (through troupe's gateway in a trial), and works
// with shell and file tools, and with the tools of the task's MCP servers
// when the task names some (contract.EnvMCPServers).
//
// It is also the proof of the stack contract (docs/stacks.md, package
// stack): every input comes from TROUPE_* environment variables and files
// only this agent's user can read; any program honouring the same contract
// can be a team member.
//
// The agent authenticates to the relay (NIP-42), learns its team from the
// channel's member list, and follows the channel. A message that mentions it
// (a p tag) starts a turn: the model sees the system prompt, the time left,
// recent channel history and the message, and calls tools until it answers
// without one. Nothing reaches the channel but what it sends with the
// send_message tool; the orchestrator ends the trial with a message that
// starts "DONE:".
package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"time"

	"github.com/troupebench/troupe/contract"
)

// Config is the agent's whole input.
type Config struct {
	RelayURL   string
	SecretKey  string // hex; never logged
	PublicKey  string
	LLMToken   string // never logged
	Channel    string
	LLMBaseURL string
	Model      string
	System     string
	MaxRounds  int
	Deadline   time.Time
	Workdir    string
	AgentID    string
	// Generation is the manifest's generation settings (TROUPE_THINKING_EFFORT
	// and the rest), applied to every model call.
	Generation contract.Generation
	// MCPServers are the task's MCP servers, whose tools the agent adds to
	// its own.
	MCPServers []contract.MCPServer
}

// ConfigFromEnv reads the stack contract (contract.Read). Every problem is
// reported, each naming its variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	g, err := contract.Read(getenv, true)
	if err != nil {
		return Config{}, fmt.Errorf("agent: the stack contract is not met (docs/stacks.md):\n%w", err)
	}
	c := Config{RelayURL: g.RelayURL, SecretKey: g.SecretKey, PublicKey: g.PublicKey, LLMToken: g.Token, Channel: g.Channel,
		LLMBaseURL: g.LLMBaseURL, Model: g.Model, System: g.System, MaxRounds: g.MaxRounds, Deadline: g.Deadline,
		Workdir: g.Workdir, AgentID: g.AgentID, Generation: g.Generation, MCPServers: g.MCPServers}
	if c.MaxRounds == 0 {
		c.MaxRounds = contract.DefaultMaxRounds
	}
	return c, nil
}

// Main is `troupe agent`: it reads the stack contract from getenv, logs JSON
// lines to logs, and runs until ctx ends (SIGTERM) or the deadline is near.
func Main(ctx context.Context, getenv func(string) string, logs io.Writer) error {
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	if cfg.AgentID != "" {
		log = log.With("agent", cfg.AgentID)
	}
	// Teammates run as other uids in one group: what this agent and its
	// commands create must be group-writable, or a teammate cannot edit it.
	syscall.Umask(0o002)
	return New(cfg, log).Run(ctx)
}
