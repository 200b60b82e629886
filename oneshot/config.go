package oneshot

import (
	"errors"
	"fmt"
	"time"

	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/member"
	"github.com/troupebench/troupe/teamtools"
)

// Flags are troupe cli's own options: how the agent continues a session,
// how much of the channel it is re-sent otherwise, and how it is checked.
type Flags struct {
	// Resume are the arguments that stand for {resume} on a run that
	// continues the agent's session (--continue, resume --last, …).
	Resume []string
	// History is how many recent channel messages a prompt carries when
	// the agent cannot resume (no --resume).
	History int
	// Probe are the arguments of a run that must exit 0 before the member
	// joins the channel (--version): the agent can start.
	Probe []string
	// ProbeTimeout bounds the probe.
	ProbeTimeout time.Duration
}

// DefaultProbeTimeout: an agent on a runtime (node, python) may take a
// while to print its version.
const DefaultProbeTimeout = 30 * time.Second

// Config is the bridge's whole input.
type Config struct {
	Member     member.Config
	System     string // the persona prompt
	SystemFile string // its file, for {system_file}
	Deadline   time.Time
	Workdir    string
	// Home holds the bridge's private folder (the team tools' socket, the
	// prompt files); empty: the system's temporary folder.
	Home    string
	Command []string
	Flags   Flags
	// Env is the agent's environment; nil: the bridge's own, without the
	// key file's variable (the bridge holds the identity).
	Env []string
	// MCPCommand starts the team tools' stdio MCP server, to which the
	// bridge adds --socket PATH; empty: this executable's "mcp" command.
	MCPCommand []string
	// Version names the bridge to the agent's MCP client.
	Version string
	// TaskMCP are the task's MCP servers, written into {mcp_config}
	// beside the team tools.
	TaskMCP []contract.MCPServer
}

// ConfigFromEnv reads the stack contract's part the bridge uses. Every
// problem is reported, each naming its variable or flag.
func ConfigFromEnv(getenv func(string) string, command []string, flags Flags) (Config, error) {
	g, err := contract.Read(getenv, false)
	errs := []error{err}
	c := Config{
		Member:     member.Config{RelayURL: g.RelayURL, Channel: g.Channel, SecretKey: g.SecretKey, PublicKey: g.PublicKey, AgentID: g.AgentID},
		System:     g.System,
		SystemFile: getenv(contract.EnvSystemPromptFile),
		Deadline:   g.Deadline, Workdir: g.Workdir, Home: g.Home, Command: command, Flags: flags, TaskMCP: g.MCPServers,
	}
	if _, err := parseTemplate(command, flags.Resume); err != nil {
		errs = append(errs, err)
	}
	if flags.History < 0 {
		errs = append(errs, fmt.Errorf("--history %d: give 0 or more messages", flags.History))
	}
	if c.Flags.History == 0 && len(flags.Resume) == 0 {
		c.Flags.History = teamtools.RecentShown
	}
	if c.Flags.ProbeTimeout <= 0 {
		c.Flags.ProbeTimeout = DefaultProbeTimeout
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("cli: the stack contract is not met (docs/stacks.md):\n%w", err)
	}
	return c, nil
}
