package trial

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
)

func TestParseNetworkPolicy(t *testing.T) {
	for in, want := range map[string]NetworkPolicy{"": NetworkTask, "task": NetworkTask, "none": NetworkNone, "public": "", "None": ""} {
		got, err := ParseNetworkPolicy(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestAllowlistProxy: agents with an allowlist reach their allowed host
// through troupe's proxy and are refused others; the verifier reaches its
// own host and no longer the agents'. The upstream is a server on the
// host's loopback, which the test's dialer reaches for every allowed name.
func TestAllowlistProxy(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+r.URL.Path)
		mu.Unlock()
		fmt.Fprint(w, "upstream:"+r.URL.Path)
	}))
	defer up.Close()
	env := testEnv(t)
	env.EgressDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, up.Listener.Addr().String())
	}
	res, dir := runTrial(t, env, "testdata/manifests/allowlist.yaml", "testdata/tasks/allowlist")
	if res.Outcome != outcome.Passed {
		out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
		t.Fatalf("%s / %s %+v:\n%s", res.Outcome, res.CompletionReason, res.ExceptionInfo, out)
	}
	n := res.Network
	if n == nil || n.Policy != NetworkTask || n.Agents.Given.Mode != string(task.Allowlist) || !slices.Equal(n.Agents.Given.AllowedHosts, []string{"allowed.test"}) ||
		n.Verifier.Given.Mode != string(task.Allowlist) || !slices.Equal(n.Verifier.Given.AllowedHosts, []string{"verifier.test"}) {
		t.Fatalf("network record %+v", n)
	}
	e := n.Egress
	if e == nil || e.Allowed != 2 || e.Refused["other.test"] != 1 || e.Refused["verifier.test"] != 1 || e.Refused["allowed.test"] != 1 || len(e.Refused) != 3 {
		t.Errorf("egress counts %+v", e)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []string{"allowed.test/agent", "verifier.test/verifier"}) {
		t.Errorf("the upstream saw %v", seen)
	}
}

// TestVerifierOnlineAgentsOffline: the verifier gets the network its own
// table asks for while the agents had none; --network none takes it away
// from the verifier too.
func TestVerifierOnlineAgentsOffline(t *testing.T) {
	env := testEnv(t)
	res, dir := runTrial(t, env, "testdata/manifests/verifier-online.yaml", "testdata/tasks/verifier-online")
	if res.Outcome != outcome.Passed {
		out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
		t.Fatalf("%s / %s %+v:\n%s", res.Outcome, res.CompletionReason, res.ExceptionInfo, out)
	}
	if n := res.Network; n.Agents.Given.Mode != string(task.NoNetwork) || n.Verifier.Given.Mode != string(task.Public) || n.Egress != nil {
		t.Errorf("network record %+v", n)
	}

	env.Network = NetworkNone
	res, dir = runTrial(t, env, "testdata/manifests/verifier-online.yaml", "testdata/tasks/verifier-online")
	out, _ := os.ReadFile(filepath.Join(dir, "verifier", "test-stdout.txt"))
	if res.Outcome != outcome.Failed || !strings.Contains(string(out), "the verifier has no network") {
		t.Fatalf("with --network none: %s %+v:\n%s", res.Outcome, res.ExceptionInfo, out)
	}
	if n := res.Network; n.Policy != NetworkNone || n.Verifier.Asked.Mode != string(task.Public) || n.Verifier.Given.Mode != string(task.NoNetwork) {
		t.Errorf("network record %+v", n)
	}
}
