package contract

import (
	"encoding/json"
	"fmt"
	"strings"
)

// What a task gives its agents beyond the instruction, as Harbor gives it
// to its agents (BaseAgent's mcp_servers and skills_dir): the task's MCP
// servers, which a member that speaks MCP adds to its tools, and the
// folder of skills in the container, which a member whose agent reads
// skills copies to where it reads them. Both are set only when the task
// has them.
const (
	// EnvMCPServers is the task's [[environment.mcp_servers]] as a JSON
	// array of MCPServer.
	EnvMCPServers = "TROUPE_MCP_SERVERS"
	// EnvSkillsDir is the task's environment.skills_dir: a folder in the
	// container.
	EnvSkillsDir = "TROUPE_SKILLS_DIR"
)

// The transports of Harbor's MCPServerConfig.
const (
	TransportStdio          = "stdio"
	TransportSSE            = "sse"
	TransportStreamableHTTP = "streamable-http"
)

// MCPServer is one of the task's MCP servers, in Harbor's MCPServerConfig
// shape: a command run in the container (stdio), or a URL the container
// reaches (sse, streamable-http), typically a compose sidecar's.
type MCPServer struct {
	Name      string   `json:"name"`
	Transport string   `json:"transport"`
	URL       string   `json:"url,omitempty"`
	Command   string   `json:"command,omitempty"`
	Args      []string `json:"args,omitempty"`
}

// Check says what is wrong with the server's entry, naming it: Harbor's
// MCPServerConfig rules (a url is checked only when it is used).
func (s MCPServer) Check() error {
	if strings.TrimSpace(s.Name) == "" {
		return fmt.Errorf("an MCP server has no name")
	}
	switch s.Transport {
	case TransportStdio:
		if strings.TrimSpace(s.Command) == "" {
			return fmt.Errorf("MCP server %q: transport stdio needs a command", s.Name)
		}
	case TransportSSE, TransportStreamableHTTP:
		if strings.TrimSpace(s.URL) == "" {
			return fmt.Errorf("MCP server %q: transport %s needs a url", s.Name, s.Transport)
		}
	default:
		return fmt.Errorf("MCP server %q: transport %q is not %s, %s or %s", s.Name, s.Transport, TransportStdio, TransportSSE, TransportStreamableHTTP)
	}
	return nil
}

// encodeMCPServers is EnvMCPServers' value; "" for none.
func encodeMCPServers(servers []MCPServer) string {
	if len(servers) == 0 {
		return ""
	}
	data, err := json.Marshal(servers)
	if err != nil {
		return ""
	}
	return string(data)
}

// decodeMCPServers reads EnvMCPServers' value; "" is none.
func decodeMCPServers(v string) ([]MCPServer, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var servers []MCPServer
	if err := json.Unmarshal([]byte(v), &servers); err != nil {
		return nil, fmt.Errorf("%s is not a JSON array of MCP servers: %v", EnvMCPServers, err)
	}
	for _, s := range servers {
		if err := s.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvMCPServers, err)
		}
	}
	return servers, nil
}
