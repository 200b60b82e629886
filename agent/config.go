// Package agent is troupe's reference agent, run as `troupe agent` inside a
// trial container: a team member that talks on the relay, thinks with any
// OpenAI-compatible model (through troupe's gateway in a trial), and works
// with shell and file tools.
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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/stack"
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
	Generation stack.Generation
}

// ConfigFromEnv reads the stack contract. Every problem is reported, each
// naming its variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	var errs []error
	need := func(name string) string {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is not set", name))
		}
		return v
	}
	readFile := func(name string) string {
		path := need(name)
		if path == "" {
			return ""
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	c.RelayURL = need(stack.EnvRelayURL)
	c.Channel = need(stack.EnvChannel)
	c.LLMBaseURL = strings.TrimSuffix(need(stack.EnvLLMBaseURL), "/")
	c.Model = need(stack.EnvModel)
	c.Workdir = need(stack.EnvWorkdir)
	c.SecretKey = readFile(stack.EnvPrivateKeyFile)
	c.LLMToken = readFile(stack.EnvLLMTokenFile)
	if path := need(stack.EnvSystemPromptFile); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", stack.EnvSystemPromptFile, err))
		}
		c.System = string(b)
	}
	if c.SecretKey != "" {
		pk, err := nostr.GetPublicKey(c.SecretKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: the file does not hold a hex secret key", stack.EnvPrivateKeyFile))
		}
		c.PublicKey = pk
	}
	if v := strings.TrimSpace(getenv(stack.EnvMaxRounds)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a whole number (0 for the default)", stack.EnvMaxRounds, v))
		}
		c.MaxRounds = n
	}
	if c.MaxRounds == 0 {
		c.MaxRounds = stack.DefaultMaxRounds
	}
	if v := need(stack.EnvDeadline); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not an RFC 3339 time", stack.EnvDeadline, v))
		}
		c.Deadline = t
	}
	if c.Workdir != "" {
		if info, err := os.Stat(c.Workdir); err != nil || !info.IsDir() {
			errs = append(errs, fmt.Errorf("%s=%q is not a folder", stack.EnvWorkdir, c.Workdir))
		}
	}
	c.AgentID = strings.TrimSpace(getenv(stack.EnvAgentID))
	var genErrs []error
	c.Generation, genErrs = generationFromEnv(getenv)
	errs = append(errs, genErrs...)
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("agent: the stack contract is not met (docs/stacks.md):\n%w", err)
	}
	return c, nil
}

// generationFromEnv reads the manifest's generation settings from the
// contract; each is optional.
func generationFromEnv(getenv func(string) string) (stack.Generation, []error) {
	var g stack.Generation
	var errs []error
	g.ThinkingEffort = strings.TrimSpace(getenv(stack.EnvThinkingEffort))
	for _, f := range []struct {
		name string
		into *int64
	}{{stack.EnvMaxOutputTokens, &g.MaxOutputTokens}, {stack.EnvContextWindowTokens, &g.ContextWindowTokens},
		{stack.EnvCompactAtPercent, &g.CompactAtPercent}, {stack.EnvCompactAtTokens, &g.CompactAtTokens}} {
		if v := strings.TrimSpace(getenv(f.name)); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q is not a whole number above 0", f.name, v))
				continue
			}
			*f.into = n
		}
	}
	if v := strings.TrimSpace(getenv(stack.EnvGenerationExtra)); v != "" {
		if err := json.Unmarshal([]byte(v), &g.Extra); err != nil {
			errs = append(errs, fmt.Errorf("%s is not a JSON object: %v", stack.EnvGenerationExtra, err))
		}
	}
	return g, errs
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
