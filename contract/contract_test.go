package contract

import (
	"fmt"
	"strings"
	"testing"
)

func TestGenerationFromEnv(t *testing.T) {
	base := map[string]string{}
	for k, v := range map[string]string{EnvThinkingEffort: "xhigh", EnvMaxOutputTokens: "5000", EnvCompactAtPercent: "80",
		EnvContextWindowTokens: "200000", EnvGenerationExtra: `{"top_p":0.9}`} {
		base[k] = v
	}
	cfg, errs := readGeneration(func(k string) string { return base[k] })
	if len(errs) != 0 || fmt.Sprintf("%+v", cfg) != "{ThinkingEffort:xhigh MaxOutputTokens:5000 ContextWindowTokens:200000 CompactAtPercent:80 CompactAtTokens:0 Extra:map[top_p:0.9]}" {
		t.Errorf("%+v %v", cfg, errs)
	}
	bad := map[string]string{EnvMaxOutputTokens: "-1", EnvGenerationExtra: "[1]"}
	_, errs = readGeneration(func(k string) string { return bad[k] })
	if len(errs) != 2 || !strings.Contains(errs[0].Error()+errs[1].Error(), "TROUPE_MAX_OUTPUT_TOKENS=\"-1\" is not a whole number above 0") {
		t.Errorf("%v", errs)
	}
}

// The task's MCP servers and skills folder reach a member as they were
// given; a value that is not the contract's form is named.
func TestTaskValuesRoundTrip(t *testing.T) {
	servers := []MCPServer{
		{Name: "facts", Transport: TransportStreamableHTTP, URL: "http://mcp:8000/mcp"},
		{Name: "local", Transport: TransportStdio, Command: "/usr/bin/srv", Args: []string{"--x", "y z"}},
	}
	env := Values{AgentID: "a-1", MCPServers: servers, SkillsDir: "/skills"}.Env()
	got, errs := decodeMCPServers(env[EnvMCPServers])
	if errs != nil || fmt.Sprint(got) != fmt.Sprint(servers) || env[EnvSkillsDir] != "/skills" {
		t.Errorf("%v %v %q", got, errs, env[EnvSkillsDir])
	}
	if env := (Values{AgentID: "a-1"}).Env(); env[EnvMCPServers] != "" || env[EnvSkillsDir] != "" {
		t.Errorf("set without a task's servers or skills: %v", env)
	}
	for _, c := range []struct{ value, want string }{
		{`{"name":"x"}`, "is not a JSON array of MCP servers"},
		{`[{"name":"x","transport":"stdio"}]`, `MCP server "x": transport stdio needs a command`},
		{`[{"name":"x","transport":"sse"}]`, `MCP server "x": transport sse needs a url`},
		{`[{"name":"x","transport":"ws","url":"ws://x"}]`, `transport "ws" is not stdio, sse or streamable-http`},
		{`[{"transport":"sse","url":"http://x"}]`, "an MCP server has no name"},
	} {
		_, err := decodeMCPServers(c.value)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), EnvMCPServers) {
			t.Errorf("%s: %v, want %q", c.value, err, c.want)
		}
	}
	if !Reserved(EnvMCPServers) || !Reserved(EnvSkillsDir) {
		t.Error("a stack could set the task's variables")
	}
}
