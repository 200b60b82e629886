package task

import (
	"fmt"
	"strings"
	"testing"
)

// TestNetworkPolicyAsHarborValidates: every combination of network_mode
// and allowed_hosts (and the older allow_internet) per table, accepted or
// refused as Harbor's models are (src/harbor/models/task/config.py at
// lieexxli/harbor 2922220; the line each case follows is cited). Harbor
// refuses allowed_hosts without network_mode = "allowlist" in every table:
// it never takes hosts alone for an allow-list.
func TestNetworkPolicyAsHarborValidates(t *testing.T) {
	pub, none := Network{Mode: Public}, Network{Mode: NoNetwork}
	list := func(h ...string) Network { return Network{Mode: Allowlist, AllowedHosts: h} }
	for _, c := range []struct {
		name, toml       string
		agents, verifier Network
		refused          string // a part of the problem; "" when accepted
	}{
		// Accepted.
		{name: "nothing: [environment] defaults to public (config.py:146-147)", toml: "", agents: pub, verifier: pub},
		{name: "environment allowlist (config.py:34-44)", toml: "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n", agents: list("a.org"), verifier: list("a.org")},
		{name: "environment empty hosts alone: public with none (config.py:40: `self.allowed_hosts` is falsy)", toml: "[environment]\nallowed_hosts = []\n", agents: pub, verifier: pub},
		{name: "environment public, empty hosts (config.py:40)", toml: "[environment]\nnetwork_mode = \"public\"\nallowed_hosts = []\n", agents: pub, verifier: pub},
		{name: "environment no-network, empty hosts (config.py:40)", toml: "[environment]\nnetwork_mode = \"no-network\"\nallowed_hosts = []\n", agents: none, verifier: none},
		{name: "agent public, empty hosts (config.py:101-105 then 40)", toml: "[agent]\nnetwork_mode = \"public\"\nallowed_hosts = []\n", agents: pub, verifier: pub},
		{name: "agent allowlist, hosts normalized (config.py:57: strip, lower, rstrip('.'))", toml: "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\" PyPI.org.. \", \"*.Example.com\"]\n", agents: list("pypi.org", "*.example.com"), verifier: pub},
		{name: "verifier override (config.py:134-140)", toml: "[environment]\nnetwork_mode = \"no-network\"\n[verifier]\nnetwork_mode = \"public\"\n", agents: none, verifier: pub},
		{name: "agent override of an allowlist baseline", toml: "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n[agent]\nnetwork_mode = \"no-network\"\n", agents: none, verifier: list("a.org")},
		{name: "allow_internet = false (config.py:642-644)", toml: "[environment]\nallow_internet = false\n", agents: none, verifier: none},
		{name: "allow_internet under an explicit mode is ignored (config.py:638)", toml: "[environment]\nnetwork_mode = \"public\"\nallow_internet = false\n", agents: pub, verifier: pub},
		{name: "allow_internet beside allowed_hosts is ignored (config.py:639)", toml: "[environment]\nallowed_hosts = []\nallow_internet = false\n", agents: pub, verifier: pub},

		// Refused.
		{name: "environment hosts alone: public with hosts (config.py:147, 40-43)", toml: "[environment]\nallowed_hosts = [\"a.org\"]\n", refused: `[environment] allowed_hosts: is only valid with network_mode = "allowlist", not "public"`},
		{name: "environment hosts beside allow_internet (config.py:40-43)", toml: "[environment]\nallowed_hosts = [\"a.org\"]\nallow_internet = false\n", refused: `[environment] allowed_hosts: is only valid with network_mode = "allowlist"`},
		{name: "agent hosts without a mode (config.py:96-100)", toml: "[agent]\nallowed_hosts = [\"a.org\"]\n", refused: `[agent] allowed_hosts: is only valid with network_mode = "allowlist" (Harbor refuses it otherwise too: a phase without network_mode`},
		{name: "agent empty hosts without a mode (config.py:97: `is not None`)", toml: "[agent]\nallowed_hosts = []\n", refused: `[agent] allowed_hosts: is only valid with network_mode = "allowlist"`},
		{name: "verifier hosts without a mode (config.py:96-100)", toml: "[verifier]\nallowed_hosts = [\"a.org\"]\n", refused: `[verifier] allowed_hosts: is only valid with network_mode = "allowlist"`},
		{name: "agent allowlist without hosts (config.py:36-39)", toml: "[agent]\nnetwork_mode = \"allowlist\"\n", refused: `[agent] network_mode: "allowlist" needs allowed_hosts`},
		{name: "agent allowlist, empty hosts (config.py:36-39)", toml: "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = []\n", refused: `[agent] allowed_hosts: must name at least one host`},
		{name: "environment allowlist without hosts (config.py:36-39)", toml: "[environment]\nnetwork_mode = \"allowlist\"\n", refused: `[environment] network_mode: "allowlist" needs allowed_hosts`},
		{name: "agent public with hosts (config.py:40-43)", toml: "[agent]\nnetwork_mode = \"public\"\nallowed_hosts = [\"a.org\"]\n", refused: `[agent] allowed_hosts: is only valid with network_mode = "allowlist", not "public"`},
		{name: "verifier no-network with hosts (config.py:40-43)", toml: "[verifier]\nnetwork_mode = \"no-network\"\nallowed_hosts = [\"a.org\"]\n", refused: `not "no-network"`},
		{name: "mode in capitals (config.py:20-25)", toml: "[agent]\nnetwork_mode = \"PUBLIC\"\n", refused: `[agent] network_mode: "PUBLIC" is not public, no-network or allowlist`},
		{name: "empty mode (config.py:20-25)", toml: "[environment]\nnetwork_mode = \"\"\n", refused: `[environment] network_mode: "" is not public`},
		{name: "a URL (config.py:60-63)", toml: "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"https://a.org/x\"]\n", refused: "without a scheme, port or path"},
		{name: "a port (config.py:60-63)", toml: "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org:443\"]\n", refused: "without a scheme, port or path"},
		{name: "a bare wildcard (config.py:64-69)", toml: "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"*.\"]\n", refused: `"*.": `},
		{name: "a wildcard not leading (config.py:70-73)", toml: "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"api.*.a.org\"]\n", refused: `"api.*.a.org": "*" is not a host name label`},
		{name: "a wildcard without its dot (config.py:70-73)", toml: "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"*a.org\"]\n", refused: `"*a.org"`},
		{name: "hosts not a list (pydantic list[str])", toml: "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = \"a.org\"\n", refused: `[agent] allowed_hosts: must be a list of strings`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk, err := Load(writeTask(t, c.toml, allParts...), Options{})
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("%q: want refused with %q, got %v", c.toml, c.refused, err)
				}
				if n := strings.Count(err.Error(), "task.toml:"); n != 1 {
					t.Errorf("%q: want one problem, got %d:\n%v", c.toml, n, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%q: %v", c.toml, err)
			}
			if fmt.Sprint(tk.AgentNetwork, tk.VerifierNetwork) != fmt.Sprint(c.agents, c.verifier) {
				t.Errorf("%q: agents %v, verifier %v; want %v, %v", c.toml, tk.AgentNetwork, tk.VerifierNetwork, c.agents, c.verifier)
			}
		})
	}
}
