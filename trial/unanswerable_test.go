package trial

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial/outcome"
)

// TestUnanswerableCallsAreUnscored: a model call the harness cannot
// answer — an endpoint on a closed port, a key the provider refuses, a
// mock scenario with no step for the request — ends the trial at once as
// unscored_infra naming the endpoint and the reason, where it used to run
// to its deadline and be scored failed against the roster.
func TestUnanswerableCallsAreUnscored(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
	}))
	t.Cleanup(refusing.Close)
	for _, c := range []struct {
		name, manifest, baseURL string
		kind                    ErrorKind
		says                    []string
	}{
		{"closed port", "testdata/manifests/upstream.yaml", "http://" + closed + "/v1", ErrEndpointUnreachable, []string{"endpoint fake", "unreachable", "is the endpoint's base_url right"}},
		{"key refused", "testdata/manifests/upstream.yaml", refusing.URL + "/v1", ErrEndpointAuth, []string{"endpoint fake", "the provider answered 401", "api_key_env"}},
		{"mock mismatch", "testdata/manifests/mismatch.yaml", "", ErrMockScenario, []string{"endpoint mock/mismatch", "mock_script_mismatch", "Write the report"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var eps llm.Endpoints
			if c.baseURL != "" {
				eps = llm.Endpoints{"fake": {Name: "fake", API: modelcall.OpenAI, BaseURL: c.baseURL, Model: "fake-model"}}
			}
			env := testEnvWith(t, eps)
			spec := Spec{Name: "hello-world__x__1", Team: team(t, c.manifest), ManifestPath: c.manifest, Task: loadTask(t, helloWorld), Attempt: 1}
			res, _ := runSpec(t, env, spec)
			if res.Outcome != outcome.UnscoredInfra || res.CompletionReason != InfraError || res.ExceptionInfo == nil || res.ExceptionInfo.ExceptionType != c.kind {
				t.Fatalf("%s / %s %+v, want unscored_infra %s", res.Outcome, res.CompletionReason, res.ExceptionInfo, c.kind)
			}
			for _, want := range c.says {
				if !strings.Contains(res.ExceptionInfo.ExceptionMessage, want) {
					t.Errorf("the message does not say %q: %s", want, res.ExceptionInfo.ExceptionMessage)
				}
			}
			// At once: not at the manifest's 300 s deadline.
			if a := res.AgentExecution; a.StartedAt == nil || a.FinishedAt == nil || a.FinishedAt.Sub(*a.StartedAt) > 60*time.Second {
				t.Errorf("the agents ran %+v", a)
			}
		})
	}
}
