package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/troupebench/troupe/internal/syncbuf"
)

func TestGatewayCommand(t *testing.T) {
	dir := isolate(t)
	write(t, filepath.Join(dir, "troupe.yaml"), "endpoints:\n  local: {api: openai, base_url: 'http://127.0.0.1:9/v1'}\n")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"gateway", "--addr", "127.0.0.1:0"}, out, out) }()
	token := regexp.MustCompile(`mock/hello-solo\s+solo\s+solo-1:solo:orchestrator\s+(tg-[0-9a-f]+)`)
	for !token.MatchString(out.String()) {
		select {
		case code := <-done:
			t.Fatalf("gateway exited with %d: %s", code, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if !regexp.MustCompile(`local\s+-\s+dev-local:dev\s+tg-`).MatchString(out.String()) {
		t.Errorf("no token for the configured endpoint:\n%s", out.String())
	}
	url := regexp.MustCompile(`gateway listening on (http://\S+)`).FindStringSubmatch(out.String())[1]
	client := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(token.FindStringSubmatch(out.String())[1]), option.WithMaxRetries(0))
	resp, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "anything",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Create /app/hello.txt containing Hello, world!")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if call := resp.Choices[0].Message.ToolCalls; len(call) != 1 || call[0].Function.Name != "shell" || !strings.Contains(call[0].Function.Arguments, "hello.txt") {
		t.Errorf("hello-solo's first step: %+v", resp.Choices[0].Message)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	var rec struct {
		Agent    string `json:"agent"`
		Endpoint string `json:"endpoint"`
		Status   int    `json:"status"`
	}
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &rec) == nil {
			break
		}
	}
	if rec.Agent != "solo-1" || rec.Endpoint != "mock/hello-solo" || rec.Status != 200 {
		t.Errorf("no call record on stdout:\n%s", out.String())
	}
}

// TestGatewayPlaysAUsersScenario: a hand-run gateway serves a configured
// mock endpoint's own scenario, a token for each of its scripts, each
// played by an agent the script is for, among teammates its templates
// name (the first script the orchestrator).
func TestGatewayPlaysAUsersScenario(t *testing.T) {
	dir := isolate(t)
	write(t, filepath.Join(dir, "troupe.yaml"), "endpoints:\n  mock/my-team: {api: mock, scenario: scenarios/my-team.yaml}\n")
	write(t, filepath.Join(dir, "scenarios", "my-team.yaml"), `scripts:
  planner:
    - reply: "{{.Self.ID}} plans as {{.Self.Kind}}"
  coder:
    - reply: "@{{.Orchestrator.ID}} coded, {{(.Role \"reviewer\").ID}} reviews"
  reviewer-2:
    - reply: "{{.Self.ID}} ({{.Self.Role}}) reviewed"
  "*":
    - reply: "anyone: {{.Self.ID}}"
`)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"gateway", "--addr", "127.0.0.1:0"}, out, out) }()
	ready := regexp.MustCompile(`mock/hello-team\s`) // the built-in scenarios are listed after the configured
	for !ready.MatchString(out.String()) {
		select {
		case code := <-done:
			t.Fatalf("gateway exited with %d: %s", code, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	url := regexp.MustCompile(`gateway listening on (http://\S+)`).FindStringSubmatch(out.String())[1]
	for _, tc := range []struct{ script, member, reply string }{
		{"planner", "planner-1:planner:orchestrator", "planner-1 plans as orchestrator"},
		{"coder", "coder-1:coder:worker", "@planner-1 coded, reviewer-2 reviews"},
		{"reviewer-2", "reviewer-2:reviewer:worker", "reviewer-2 (reviewer) reviewed"},
		{"*", "other-1:other:worker", "anyone: other-1"},
	} {
		line := regexp.MustCompile(`(?m)^mock/my-team\s+` + regexp.QuoteMeta(tc.script) + `\s+` + regexp.QuoteMeta(tc.member) + `\s+(tg-[0-9a-f]+)$`).FindStringSubmatch(out.String())
		if line == nil {
			t.Errorf("no token for script %s played by %s:\n%s", tc.script, tc.member, out.String())
			continue
		}
		client := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(line[1]), option.WithMaxRetries(0))
		resp, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
			Model: "anything", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
		})
		if err != nil || resp.Choices[0].Message.Content != tc.reply {
			t.Errorf("script %s: %v, want %q", tc.script, err, tc.reply)
			if err == nil {
				t.Logf("got %q", resp.Choices[0].Message.Content)
			}
		}
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}
