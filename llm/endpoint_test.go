package llm

import (
	"strings"
	"testing"

	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/modelcall"
)

func parse(t *testing.T, doc string) (Endpoints, error) {
	t.Helper()
	root, err := yaml11.Parse("troupe.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	d := yaml11.Decoder{File: "troupe.yaml"}
	eps := ParseEndpoints(&d, root.Get("endpoints"), "endpoints")
	return eps, d.Err()
}

func TestParseEndpoints(t *testing.T) {
	eps, err := parse(t, `endpoints:
  databricks-claude-opus-5:
    api: anthropic
    base_url: https://example.cloud.databricks.com/serving-endpoints/
    api_key_env: DATABRICKS_TOKEN
    model: claude-opus-5
  gpt-5.6-luna: {api: openai, base_url: "http://127.0.0.1:8000/v1"}
  mock/lead: {api: mock, scenario: examples/scenarios/hello-team.yaml}
  mock/plain: {api: mock}
`)
	if err != nil {
		t.Fatal(err)
	}
	want := Endpoints{
		"databricks-claude-opus-5": {Name: "databricks-claude-opus-5", API: modelcall.Anthropic, BaseURL: "https://example.cloud.databricks.com/serving-endpoints", APIKeyEnv: "DATABRICKS_TOKEN", Model: "claude-opus-5"},
		"gpt-5.6-luna":             {Name: "gpt-5.6-luna", API: modelcall.OpenAI, BaseURL: "http://127.0.0.1:8000/v1", Model: "gpt-5.6-luna"},
		"mock/lead":                {Name: "mock/lead", API: Mock, Model: "mock/lead", Scenario: "examples/scenarios/hello-team.yaml"},
		"mock/plain":               {Name: "mock/plain", API: Mock, Model: "mock/plain", Scenario: "plain"},
	}
	for name, w := range want {
		if got := eps[name]; got != w {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, w)
		}
	}
	if len(eps) != len(want) {
		t.Errorf("got %d endpoints", len(eps))
	}
}

func TestParseEndpointsRules(t *testing.T) {
	tests := []struct{ doc, want string }{
		{"endpoints: {a: {base_url: http://x}}", `missing required key "api"`},
		{"endpoints: {a: {api: grpc}}", "must be openai, anthropic or mock"},
		{"endpoints: {a: {api: openai, base_url: http://x, retries: 21}}", "must be between 0 (the agent sees every failure) and 20; found 21"},
		{"endpoints: {a: {api: openai, base_url: http://x, retries: -1}}", "must be between 0"},
		{"endpoints: {mock/a: {api: mock, retries: 2}}", "a mock endpoint is never retried"},
		{"endpoints: {a: {api: openai}}", "needs base_url"},
		{"endpoints: {a: {api: openai, base_url: example.com}}", "http:// or https:// URL"},
		{"endpoints: {a: {api: openai, base_url: 'https://user:pw@x.com'}}", "must not carry credentials"},
		{"endpoints: {a: {api: openai, base_url: http://x, api_key_env: sk-abc123}}", "never put the key itself"},
		{"endpoints: {a: {api: openai, base_url: http://x, api_key: sk-abc}}", "never reads a key from a file"},
		{"endpoints: {a: {api: openai, base_url: http://x, scenario: s}}", "only mock endpoints"},
		{"endpoints: {a: {api: mock, base_url: http://x}}", "calls no upstream"},
		{"endpoints: {a: {api: mock, api_key_env: K}}", "needs no key"},
		{"endpoints: {a: {api: openai, base_url: http://x, modle: m}}", `did you mean "model"`},
		{"endpoints: {a: {api: openai, base_url: http://x, model: ''}}", "must not be empty"},
		{"endpoints: [a]", "must be a mapping"},
	}
	for _, tt := range tests {
		_, err := parse(t, tt.doc)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "troupe.yaml:1:") {
			t.Errorf("%s: got %v, want a located error saying %q", tt.doc, err, tt.want)
		}
	}
}

func TestLookup(t *testing.T) {
	eps := Endpoints{"mock/x": {Name: "mock/x", API: Mock, Model: "mock/x", Scenario: "file.yaml"}}
	if ep, ok := eps.Lookup("mock/x"); !ok || ep.Scenario != "file.yaml" {
		t.Errorf("configured endpoint not found: %+v", ep)
	}
	if ep, ok := eps.Lookup("mock/hello-team"); !ok || ep.API != Mock || ep.Scenario != "hello-team" {
		t.Errorf("implicit mock endpoint: %+v %v", ep, ok)
	}
	for _, name := range []string{"mock/", "gpt-5", ""} {
		if _, ok := eps.Lookup(name); ok {
			t.Errorf("%q resolved without configuration", name)
		}
	}
	if s := (Endpoint{Name: "a", API: modelcall.OpenAI, BaseURL: "http://x", APIKeyEnv: "K", Model: "m"}).String(); s != "a (openai at http://x, model m, key from $K)" {
		t.Errorf("String() = %q", s)
	}
}
