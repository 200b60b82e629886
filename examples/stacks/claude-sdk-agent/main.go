// Command claude-sdk-agent is a one-shot coding agent, as `claude -p`,
// `codex exec` or `crush run` are: it takes a prompt, works on the
// current folder until the model answers without a tool call, prints the
// answer and exits. Everything that makes it an agent is Anthropic's
// official Go SDK (github.com/anthropics/anthropic-sdk-go/v2): the agent
// loop is the SDK's tool runner, its tools are the SDK's agent toolset
// (bash, read, write, edit, glob, grep, in their own schema), and MCP
// servers' tools join through the SDK's MCP adapter. This file only wires
// them to a command line. troupe's tests run it behind `troupe cli` as a
// team member, as a worker and as the orchestrator, with models scripted
// in the toolset's own schema (docs/stacks.md).
//
// Usage:
//
//	claude-sdk-agent [--mcp-config FILE] [--max-iterations N] [PROMPT...]
//
// With no PROMPT it reads the prompt from standard input. It calls
// Anthropic's Messages API at ANTHROPIC_BASE_URL with ANTHROPIC_API_KEY,
// as model ANTHROPIC_MODEL. --mcp-config names a file of the common form
// {"mcpServers": {"name": {"command": ..., "args": [...]}}}: each server
// is started over stdio and its tools offered to the model.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicmcp "github.com/anthropics/anthropic-sdk-go/v2/mcp"
	"github.com/anthropics/anthropic-sdk-go/v2/tools/agenttoolset"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "claude-sdk-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	mcpConfig := flag.String("mcp-config", "", "a JSON file of MCP servers whose tools the model may call")
	maxIterations := flag.Int("max-iterations", 50, "the most model calls of one run")
	flag.Parse()
	prompt := strings.Join(flag.Args(), " ")
	if strings.TrimSpace(prompt) == "" {
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fmt.Errorf("read the prompt: %w", err)
		}
		prompt = string(data)
	}
	if strings.TrimSpace(prompt) == "" {
		return errors.New("no prompt: give it as arguments or on standard input")
	}
	model := os.Getenv("ANTHROPIC_MODEL")
	if model == "" {
		return errors.New("ANTHROPIC_MODEL is not set")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	tools := agenttoolset.BetaAgentToolset20260401(&agenttoolset.AgentToolContext{Workdir: wd})
	defer agenttoolset.CloseAll(tools)
	if *mcpConfig != "" {
		more, closeAll, err := mcpTools(ctx, *mcpConfig)
		defer closeAll()
		if err != nil {
			return err
		}
		tools = append(tools, more...)
	}
	client := anthropic.NewClient() // ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY
	runner := client.Beta.Messages.NewToolRunner(tools, anthropic.BetaToolRunnerParams{
		BetaMessageNewParams: anthropic.BetaMessageNewParams{
			Model:     anthropic.Model(model),
			MaxTokens: 4096,
			Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
		},
		MaxIterations: *maxIterations,
		// The whole history with every request, as any Messages API
		// endpoint takes it, rather than a server-side thread.
		DisableThread: true,
	})
	msg, err := runner.RunToCompletion(ctx)
	if err != nil {
		return err
	}
	for _, c := range msg.Content {
		if c.Type == "text" {
			fmt.Println(c.Text)
		}
	}
	return nil
}

// mcpTools starts each MCP server of the config file and returns its tools
// for the runner, and a function that ends the servers.
func mcpTools(ctx context.Context, path string) ([]anthropic.BetaTool, func(), error) {
	var sessions []*mcp.ClientSession
	closeAll := func() {
		for _, s := range sessions {
			s.Close()
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, closeAll, fmt.Errorf("--mcp-config: %w", err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, closeAll, fmt.Errorf("--mcp-config %s: %w", path, err)
	}
	var tools []anthropic.BetaTool
	for name, srv := range cfg.MCPServers {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "claude-sdk-agent"}, nil).
			Connect(ctx, &mcp.CommandTransport{Command: exec.Command(srv.Command, srv.Args...)}, nil)
		if err != nil {
			return nil, closeAll, fmt.Errorf("MCP server %s: %w", name, err)
		}
		sessions = append(sessions, cs)
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			return nil, closeAll, fmt.Errorf("MCP server %s: list its tools: %w", name, err)
		}
		more, err := anthropicmcp.NewBetaTools(list.Tools, cs)
		if err != nil {
			return nil, closeAll, fmt.Errorf("MCP server %s: %w", name, err)
		}
		tools = append(tools, more...)
	}
	return tools, closeAll, nil
}
