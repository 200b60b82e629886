package llm

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/modelcall"
)

// Mock is the wire format of an endpoint that plays a scripted scenario
// (a Scenario), so trials run offline and deterministically. It is an
// endpoint's, never a call's: a mock answers calls in every format.
const Mock modelcall.API = "mock"

// MockPrefix marks an endpoint name that needs no configuration: mock/<name>
// plays the scenario called <name>.
const MockPrefix = "mock/"

// Endpoint says where calls for one endpoint name go. The real API key is
// never here: APIKeyEnv names the host environment variable that holds it,
// read by the gateway when it starts.
type Endpoint struct {
	Name string
	API  modelcall.API
	// BaseURL is the upstream's URL (openai, anthropic); empty for mock.
	BaseURL string
	// APIKeyEnv names the variable holding the key; empty sends no key (a
	// local server).
	APIKeyEnv string
	// Model is the upstream's model name; it defaults to Name.
	Model string
	// Scenario names the mock scenario (a built-in name or a file); it
	// defaults to Name without its "mock/" prefix.
	Scenario string
	// Retries is how many times the gateway retries a call the upstream
	// could not take (429, 5xx, 529, a connection that failed before an
	// answer) before the agent sees the failure; nil is DefaultRetries.
	Retries *int
}

// DefaultRetries is an endpoint's retries when it sets none.
const DefaultRetries = 4

// retries is the endpoint's retry budget per call.
func (e Endpoint) retries() int {
	if e.Retries == nil {
		return DefaultRetries
	}
	return *e.Retries
}

// Endpoints is the endpoints: section of troupe's configuration, by name.
type Endpoints map[string]Endpoint

// Lookup returns the configuration of an endpoint name. A name starting with
// "mock/" that is not configured is a mock endpoint playing the scenario of
// the same name, so examples and tests need no configuration file.
func (e Endpoints) Lookup(name string) (Endpoint, bool) {
	if ep, ok := e[name]; ok {
		return ep, true
	}
	if scenario, ok := strings.CutPrefix(name, MockPrefix); ok && scenario != "" {
		return Endpoint{Name: name, API: Mock, Model: name, Scenario: scenario}, true
	}
	return Endpoint{}, false
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseEndpoints decodes an endpoints: section, recording every problem in d.
func ParseEndpoints(d *yaml11.Decoder, n *yaml11.Node, path string) Endpoints {
	out := Endpoints{}
	d.Map(n, path, func(name string, key, v *yaml11.Node, path string) {
		if strings.TrimSpace(name) == "" {
			d.Errorf(key, path, "an endpoint needs a name")
			return
		}
		if ep, ok := parseEndpoint(d, name, v, path); ok {
			out[name] = ep
		}
	})
	return out
}

// parseEndpoint reads one endpoint; false when it has a problem (recorded
// in d).
func parseEndpoint(d *yaml11.Decoder, name string, n *yaml11.Node, path string) (Endpoint, bool) {
	before := d.Count()
	ep := Endpoint{Name: name}
	var baseURL, keyEnv, scenario, retries *yaml11.Node
	ok := d.Struct(n, path, []yaml11.Field{
		{Name: "api", Required: true, Decode: func(n *yaml11.Node, path string) {
			s, ok := d.String(n, path)
			switch modelcall.API(s) {
			case modelcall.OpenAI, modelcall.Anthropic, Mock:
				ep.API = modelcall.API(s)
			default:
				if ok {
					d.Errorf(n, path, "must be openai, anthropic or mock; found %q", s)
				}
			}
		}},
		{Name: "base_url", Decode: func(n *yaml11.Node, path string) {
			baseURL = n
			ep.BaseURL = parseBaseURL(d, n, path)
		}},
		{Name: "api_key_env", Decode: func(n *yaml11.Node, path string) {
			keyEnv = n
			ep.APIKeyEnv = parseKeyEnv(d, n, path)
		}},
		{Name: "model", Decode: func(n *yaml11.Node, path string) {
			if s, ok := d.String(n, path); ok {
				if s == "" {
					d.Errorf(n, path, "must not be empty; leave it out to send the endpoint name")
					return
				}
				ep.Model = s
			}
		}},
		{Name: "scenario", Decode: func(n *yaml11.Node, path string) {
			scenario = n
			ep.Scenario, _ = d.String(n, path)
		}},
		{Name: "retries", Decode: func(n *yaml11.Node, path string) {
			retries = n
			if v, ok := d.Int(n, path); ok {
				if v < 0 || v > 20 {
					d.Errorf(n, path, "must be between 0 (the agent sees every failure) and 20; found %d", v)
					return
				}
				r := int(v)
				ep.Retries = &r
			}
		}},
	}, map[string]string{
		"api_key": "troupe never reads a key from a file; put it in an environment variable and name that with api_key_env",
		"key":     "troupe never reads a key from a file; put it in an environment variable and name that with api_key_env",
	})
	if !ok {
		return ep, false
	}
	switch ep.API {
	case modelcall.OpenAI, modelcall.Anthropic:
		if baseURL == nil {
			d.Errorf(n, path, "an %s endpoint needs base_url", ep.API)
		}
		if scenario != nil {
			d.Errorf(scenario, yaml11.Key(path, "scenario"), "only mock endpoints play scenarios")
		}
	case Mock:
		if baseURL != nil {
			d.Errorf(baseURL, yaml11.Key(path, "base_url"), "a mock endpoint calls no upstream; remove base_url")
		}
		if retries != nil {
			d.Errorf(retries, yaml11.Key(path, "retries"), "a mock endpoint is never retried: what its scenario scripts is what the agent sees; remove retries")
		}
		if keyEnv != nil {
			d.Errorf(keyEnv, yaml11.Key(path, "api_key_env"), "a mock endpoint needs no key; remove api_key_env")
		}
		if ep.Scenario == "" {
			ep.Scenario = strings.TrimPrefix(name, MockPrefix)
		}
	}
	if ep.Model == "" {
		ep.Model = name
	}
	return ep, d.Count() == before
}

// parseBaseURL reads an upstream's base_url: an http or https URL with no
// credentials, without its trailing slash; "" when it is none.
func parseBaseURL(d *yaml11.Decoder, n *yaml11.Node, path string) string {
	s, ok := d.String(n, path)
	if !ok {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		d.Errorf(n, path, "must be an http:// or https:// URL such as https://api.openai.com/v1; found %q", s)
		return ""
	}
	if u.User != nil {
		d.Errorf(n, path, "must not carry credentials; name the variable that holds the key with api_key_env")
		return ""
	}
	return strings.TrimSuffix(s, "/")
}

// parseKeyEnv reads api_key_env: the name of an environment variable,
// never a key; "" when it is none.
func parseKeyEnv(d *yaml11.Decoder, n *yaml11.Node, path string) string {
	s, ok := d.String(n, path)
	if !ok {
		return ""
	}
	if !envName.MatchString(s) {
		d.Errorf(n, path, "must name an environment variable (letters, digits, _), such as OPENAI_API_KEY; never put the key itself in a file")
		return ""
	}
	return s
}

// String describes an endpoint for logs and messages; it never holds a key.
func (e Endpoint) String() string {
	switch e.API {
	case Mock:
		return fmt.Sprintf("%s (mock, scenario %s)", e.Name, e.Scenario)
	case "":
		return e.Name
	}
	key := "no key"
	if e.APIKeyEnv != "" {
		key = "key from $" + e.APIKeyEnv
	}
	return fmt.Sprintf("%s (%s at %s, model %s, %s)", e.Name, e.API, e.BaseURL, e.Model, key)
}
