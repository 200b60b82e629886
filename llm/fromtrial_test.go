package llm

// replayScenario scripts two calls: a tool call, then a reply, with text
// that looks like a template.
const replayScenario = `description: "two calls to record"
scripts:
  "*":
    - tool_calls:
        - name: shell
          arguments:
            command: 'echo {{"{{"}}not a template}}'
            timeout_s: 5
      usage: {input_tokens: 50, output_tokens: 7, cached_tokens: 10}
    - reply: 'all {{"{{"}}done}} here'
      chunks: 2
      usage: {input_tokens: 80, output_tokens: 9}
`

// formats are the calls of one agent in each wire format.
var formats = []struct {
	name, path, body string
	anthropic        bool
}{
	{"chat", "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"go"}]}`, false},
	{"chat-stream", "/v1/chat/completions", `{"model":"x","stream":true,"messages":[{"role":"user","content":"go"}]}`, false},
	{"responses", "/v1/responses", `{"model":"x","input":"go"}`, false},
	{"responses-stream", "/v1/responses", `{"model":"x","stream":true,"input":"go"}`, false},
	{"anthropic", "/v1/messages", `{"model":"x","max_tokens":10,"messages":[{"role":"user","content":"go"}]}`, true},
	{"anthropic-stream", "/v1/messages", `{"model":"x","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"go"}]}`, true},
}
