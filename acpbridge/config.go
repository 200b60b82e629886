package acpbridge

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/member"
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
	// TaskMCP are the task's MCP servers, given to the child's session
	// beside the team tools.
	TaskMCP []contract.MCPServer
}

// ConfigFromEnv reads the stack contract's part the bridge uses, and the
// permission policy. Every problem is reported, each naming its variable.
func ConfigFromEnv(getenv func(string) string, command []string) (Config, error) {
	g, err := contract.Read(getenv, false)
	errs := []error{err}
	c := Config{
		Member: member.Config{RelayURL: g.RelayURL, Channel: g.Channel, SecretKey: g.SecretKey, PublicKey: g.PublicKey, AgentID: g.AgentID},
		System: g.System, Deadline: g.Deadline, Workdir: g.Workdir, Home: g.Home, Command: command, TaskMCP: g.MCPServers,
	}
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
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("acp: the stack contract is not met (docs/stacks.md):\n%w", err)
	}
	return c, nil
}
