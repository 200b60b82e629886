package trial

import (
	"context"
	"fmt"

	"github.com/troupebench/troupe/egress"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trialdir"
)

// NetworkPolicy is the user's say over trial networks (--network): the
// result's network.policy, a type of the result's format
// (trialdir.NetworkPolicy) whose values are the trial's.
type NetworkPolicy = trialdir.NetworkPolicy

// The network policies.
const (
	// NetworkTask gives each phase what its task asks (Harbor's meaning:
	// the internet unless the task says otherwise). The zero value means it.
	NetworkTask NetworkPolicy = "task"
	// NetworkNone gives no phase of any trial a network: the relay and the
	// gateway, through the tunnel, are all a container reaches.
	NetworkNone NetworkPolicy = "none"
)

// ParseNetworkPolicy reads --network.
func ParseNetworkPolicy(s string) (NetworkPolicy, error) {
	switch p := NetworkPolicy(s); p {
	case "", NetworkTask:
		return NetworkTask, nil
	case NetworkNone:
		return p, nil
	}
	return "", fmt.Errorf("network policy %q is not %q (what each task asks) or %q (no trial gets a network)", s, NetworkTask, NetworkNone)
}

// proxyListen is where the allowlist proxy listens in the container: the
// tunnel's third port.
const proxyListen = "127.0.0.1:3602"

// given is what a phase gets under the user's policy.
func given(p NetworkPolicy, asked task.Network) task.Network {
	if p == NetworkNone {
		return task.Network{Mode: task.NoNetwork}
	}
	return asked
}

// recordedNetwork is a phase's network as result.json records it.
func recordedNetwork(n task.Network) trialdir.Network {
	return trialdir.Network{Mode: string(n.Mode), AllowedHosts: n.AllowedHosts}
}

// planNetwork decides each phase's network.
func (r *run) planNetwork() {
	policy := r.env.Network
	if policy == "" {
		policy = NetworkTask
	}
	t := r.spec.Task
	r.agentGiven, r.verifierGiven = given(policy, t.AgentNetwork), given(policy, t.VerifierNetwork)
	r.res.Network = &trialdir.NetworkRecord{
		Policy:   policy,
		Agents:   trialdir.PhaseNetwork{Asked: recordedNetwork(t.AgentNetwork), Given: recordedNetwork(r.agentGiven)},
		Verifier: trialdir.PhaseNetwork{Asked: recordedNetwork(t.VerifierNetwork), Given: recordedNetwork(r.verifierGiven)},
	}
	if r.agentNet().Mode != task.Public || r.verifierNet().Mode != task.Public {
		iso := r.env.Runtime.Isolation()
		r.res.Network.Isolation = &iso
	}
}

// agentNet and verifierNet are the networks planNetwork gave the phases.
func (r *run) agentNet() task.Network    { return r.agentGiven }
func (r *run) verifierNet() task.Network { return r.verifierGiven }

// agentsOnline reports whether the agents' phase has the internet.
func (r *run) agentsOnline() bool { return r.agentNet().Mode == task.Public }

// containerNetwork is the network the container is created with: a bridge
// of its own when any phase has the internet (phases without it are taken
// offline), else none.
func (r *run) containerNetwork() string {
	if r.agentNet().Mode == task.Public || r.verifierNet().Mode == task.Public {
		return runtime.NetworkBridge
	}
	return runtime.NetworkNone
}

// startEgress starts the allowlist proxy when a phase has an allowlist,
// with the agents' hosts.
func (r *run) startEgress(ctx context.Context) error {
	if r.agentNet().Mode != task.Allowlist && r.verifierNet().Mode != task.Allowlist {
		return nil
	}
	p := egress.New(r.agentNet().AllowedHosts, r.env.EgressDial, r.log)
	if err := p.Open(ctx); err != nil {
		return err
	}
	r.egress = p
	r.log.Info("egress proxy", "addr", r.egress.Addr(), "agents", r.agentNet().AllowedHosts, "verifier", r.verifierNet().AllowedHosts)
	return nil
}

// proxyEnv is the environment that points a phase's HTTP clients at the
// allowlist proxy; nil when the phase has none. The tunnel's own ports
// stay direct.
func proxyEnv(n task.Network) []string {
	if n.Mode != task.Allowlist {
		return nil
	}
	u := "http://" + proxyListen
	direct := "127.0.0.1,localhost,::1"
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u, "NO_PROXY=" + direct, "no_proxy=" + direct}
}

// verifierNetwork gives the container the verifier's network, and the
// proxy the verifier's hosts.
func (r *run) verifierNetwork(ctx context.Context) error {
	if r.containerNetwork() == runtime.NetworkBridge && r.verifierNet().Mode != r.agentNet().Mode {
		if err := r.container.SetOnline(ctx, r.verifierNet().Mode == task.Public); err != nil {
			return fmt.Errorf("give the verifier its network (%s): %w", r.verifierNet().Mode, err)
		}
	}
	if r.egress != nil {
		r.egress.SetHosts(r.verifierNet().AllowedHosts)
	}
	r.log.Info("verifier network", "mode", r.verifierNet().Mode, "hosts", r.verifierNet().AllowedHosts)
	return nil
}

// stopEgress ends the proxy and records its counts.
func (r *run) stopEgress(ctx context.Context) {
	if r.egress == nil {
		return
	}
	if err := r.egress.Close(ctx); err != nil {
		r.cleanupError("stop the egress proxy", err)
	}
	stats := r.egress.Stats()
	r.res.Network.Egress = &stats
	r.egress = nil
}
