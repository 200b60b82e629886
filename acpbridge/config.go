package acpbridge

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/member"
	"github.com/troupebench/troupe/stack"
)

// EnvPermission sets how the bridge answers session/request_permission: a
// stack fixes it in its fixed_env.
const EnvPermission = "TROUPE_ACP_PERMISSION"

// Permission is the policy for the child's permission requests.
type Permission string

const (
	// Allow picks an option that allows the tool call: the default, since
	// nobody is there to ask in a trial.
	Allow Permission = "allow"
	// Deny picks an option that rejects it.
	Deny Permission = "deny"
)

// Config is the bridge's whole input.
type Config struct {
	Member   member.Config
	System   string // the persona prompt, sent with the first turn
	Deadline time.Time
	Workdir  string
	// Home holds the MCP socket's private folder; empty: the system's
	// temporary folder.
	Home       string
	Permission Permission
	// Command is the ACP agent to run: the program and its arguments.
	Command []string
	// Env is the child's environment; nil: the bridge's own, without the
	// key file's variable (the bridge holds the identity).
	Env []string
	// MCPCommand starts the team tools' stdio MCP server, to which the
	// bridge adds --socket PATH; empty: this executable's "mcp" command.
	MCPCommand []string
	// Version names the bridge to the child in initialize.
	Version string
}

// ConfigFromEnv reads the stack contract's part the bridge uses, and the
// permission policy. Every problem is reported, each naming its variable.
func ConfigFromEnv(getenv func(string) string, command []string) (Config, error) {
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
		return string(b)
	}
	c.Member.RelayURL = need(stack.EnvRelayURL)
	c.Member.Channel = need(stack.EnvChannel)
	c.Member.SecretKey = strings.TrimSpace(readFile(stack.EnvPrivateKeyFile))
	c.Member.AgentID = strings.TrimSpace(getenv(stack.EnvAgentID))
	if c.Member.SecretKey != "" {
		pk, err := nostr.GetPublicKey(c.Member.SecretKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: the file does not hold a hex secret key", stack.EnvPrivateKeyFile))
		}
		c.Member.PublicKey = pk
	}
	c.System = readFile(stack.EnvSystemPromptFile)
	if v := need(stack.EnvDeadline); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not an RFC 3339 time", stack.EnvDeadline, v))
		}
		c.Deadline = t
	}
	c.Workdir = need(stack.EnvWorkdir)
	if c.Workdir != "" {
		if info, err := os.Stat(c.Workdir); err != nil || !info.IsDir() {
			errs = append(errs, fmt.Errorf("%s=%q is not a folder", stack.EnvWorkdir, c.Workdir))
		}
	}
	c.Home = strings.TrimSpace(getenv("HOME"))
	switch p := Permission(strings.ToLower(strings.TrimSpace(getenv(EnvPermission)))); p {
	case "", Allow:
		c.Permission = Allow
	case Deny:
		c.Permission = Deny
	default:
		errs = append(errs, fmt.Errorf("%s=%q is neither allow nor deny", EnvPermission, p))
	}
	if len(command) == 0 || command[0] == "" {
		errs = append(errs, errors.New("no ACP agent to run: troupe acp -- COMMAND [ARGS...]"))
	}
	c.Command = command
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("acp: the stack contract is not met (docs/stacks.md):\n%w", err)
	}
	return c, nil
}

// childEnv is the child's environment: the bridge's, less the key file's
// variable. The child runs as the same uid and could read the key anyway;
// without the variable, a child that happens to honour the contract
// itself does not try to take the bridge's place on the relay.
func childEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, stack.EnvPrivateKeyFile+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
