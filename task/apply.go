package task

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/internal/located"
)

// orgName is the form of [task] name Harbor requires.
var orgName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$`)

// apply takes task.toml's values into the task, recording problems (what
// Harbor refuses too, or what troupe cannot run yet) and returning
// warnings. The tables are read in the file's usual order, so problems
// and warnings come in that order.
func (t *Task) apply(tf *taskFile, at locator, p *problems, getenv func(string) string) (warnings []*located.Error) {
	warnings = t.applyTop(tf, at, p)
	t.applyPhases(tf, at, p, getenv)
	warnings = append(warnings, t.applyEnvironment(tf, at, p, getenv)...)
	warnings = append(warnings, t.applySteps(tf, at, p, getenv)...)
	// [solution] env is the oracle's, resolved when it runs, as in Harbor.
	for _, k := range slices.Sorted(maps.Keys(tf.Solution.Env)) {
		if v, ok := p.asString(at.at("solution", "env"), tf.Solution.Env[k]); ok {
			if t.solutionEnv == nil {
				t.solutionEnv = map[string]any{}
			}
			t.solutionEnv[k] = v
		}
	}
	t.solutionAt = at.at("solution", "env")
	return warnings
}

// applyTop reads the top level: the schema, the source, artifacts and
// [task] (steps.go reads [[steps]]).
func (t *Task) applyTop(tf *taskFile, at locator, p *problems) (warnings []*located.Error) {
	schema := tf.SchemaVersion
	if schema == nil {
		schema = tf.Version // the older name; schema_version wins
	}
	t.SchemaVersion, _ = p.asString(at.at("", "schema_version"), schema)
	t.Source, _ = p.asString(at.at("", "source"), tf.Source)
	warnings = t.applyArtifacts(tf.Artifacts, at, p)
	t.applyTroupe(tf.Metadata, at, p)
	if tf.Task != nil {
		f := at.at("task", "name")
		warnings = append(warnings, knownIn(at, "task", tf.Task, "name", "description", "authors", "keywords", "version")...)
		name, ok := p.asString(f, tf.Task["name"])
		switch {
		case !ok:
		case !orgName.MatchString(name) || strings.Contains(name, ".."):
			p.add(f, "%q must be in org/name form (letters, digits, '.', '_' and '-'), as Harbor requires", name)
		default:
			t.ID = name
		}
	}
	return warnings
}

// applyArtifacts reads artifacts: paths, or {source, destination,
// exclude} tables.
func (t *Task) applyArtifacts(list []any, at locator, p *problems) (warnings []*located.Error) {
	f := at.at("", "artifacts")
	for i, a := range list {
		switch a := a.(type) {
		case string:
			t.Artifacts = append(t.Artifacts, Artifact{Source: a})
		case map[string]any:
			warnings = append(warnings, knownIn(at, "artifacts", a, "source", "destination", "exclude")...)
			var art Artifact
			art.Source, _ = p.asString(f, a["source"])
			art.Destination, _ = p.asString(f, a["destination"])
			if ex, ok := a["exclude"]; ok {
				art.Exclude, _ = p.asStrings(f, ex)
			}
			t.Artifacts = append(t.Artifacts, art)
		default:
			p.add(f, "entry %d must be a path or a table {source, destination, exclude}, found %v", i+1, a)
		}
	}
	for i, a := range t.Artifacts {
		switch {
		case !path.IsAbs(a.Source):
			p.add(f, "entry %d: source %q must be an absolute path in the container", i+1, a.Source)
		case a.Destination != "" && (path.IsAbs(a.Destination) || !fs.ValidPath(path.Clean(a.Destination))):
			p.add(f, "entry %d: destination %q must be a relative path inside artifacts/", i+1, a.Destination)
		}
	}
	return warnings
}

// applyPhases reads [agent] and [verifier]: timeouts, users, the
// verifier's env, and what troupe does not run yet.
func (t *Task) applyPhases(tf *taskFile, at locator, p *problems, getenv func(string) string) {
	p.seconds(at.at("agent", "timeout_sec"), tf.Agent.TimeoutSec, &t.AgentTimeout)
	p.seconds(at.at("verifier", "timeout_sec"), tf.Verifier.TimeoutSec, &t.VerifierTimeout)
	t.AgentUser = p.asUser(at.at("agent", "user"), tf.Agent.User)
	t.VerifierUser = p.asUser(at.at("verifier", "user"), tf.Verifier.User)
	t.VerifierEnv = t.resolveEnv(at.at("verifier", "env"), tf.Verifier.Env, p, getenv)
	if m, ok := p.asString(at.at("verifier", "environment_mode"), tf.Verifier.EnvironmentMode); ok && m != "" && m != "shared" || tf.Verifier.Environment != nil {
		p.add(at.at("verifier", "environment_mode"), "a separate verifier environment is not supported yet: the verifier runs in the agents' container (\"shared\")")
	}
	if len(tf.Verifier.Collect) > 0 {
		p.add(at.at("verifier", "collect"), "[[verifier.collect]] is not supported yet")
	}
}

// applyEnvironment reads [environment]: the image, resources, networks,
// MCP servers, env, folders, the healthcheck and what troupe cannot give.
func (t *Task) applyEnvironment(tf *taskFile, at locator, p *problems, getenv func(string) string) (warnings []*located.Error) {
	env := tf.Environment
	t.Image, _ = p.asString(at.at("environment", "docker_image"), env.DockerImage)
	t.Image = strings.TrimSpace(t.Image)
	p.seconds(at.at("environment", "build_timeout_sec"), env.BuildTimeoutSec, &t.BuildTimeout)
	t.applyResources(tf, at, p)
	t.AgentNetwork, t.VerifierNetwork = network(at, p, tf)
	t.MCPServers, warnings = mcpServers(at, p, env.MCPServers)
	t.Env = t.resolveEnv(at.at("environment", "env"), env.Env, p, getenv)
	t.SkillsDir, _ = p.asString(at.at("environment", "skills_dir"), env.SkillsDir)
	workdir, _ := p.asString(at.at("environment", "workdir"), env.Workdir)
	if workdir != "" && !path.IsAbs(workdir) {
		p.add(at.at("environment", "workdir"), "%q must be an absolute path", workdir)
	}
	t.Workdir = workdir
	if env.Healthcheck != nil {
		t.Healthcheck = healthcheck(at, p, env.Healthcheck)
		warnings = append(warnings, knownIn(at, "environment.healthcheck", env.Healthcheck,
			"command", "interval_sec", "timeout_sec", "start_period_sec", "start_interval_sec", "retries")...)
	}
	if osName, ok := p.asString(at.at("environment", "os"), env.OS); ok && osName != "" && !strings.EqualFold(osName, "linux") {
		p.add(at.at("environment", "os"), "%q: troupe runs Linux containers only", osName)
	}
	if env.TPU != nil {
		p.add(at.at("environment", "tpu"), "troupe does not give trials TPUs")
	}
	return warnings
}

// applyResources reads cpus, memory, storage and GPUs.
func (t *Task) applyResources(tf *taskFile, at locator, p *problems) {
	env := tf.Environment
	if env.CPUs != nil {
		f := at.at("environment", "cpus")
		if x, ok := p.asFloat(f, env.CPUs); ok {
			if x <= 0 {
				p.add(f, "must be above 0, found %v", x)
			}
			t.CPUs = x
		}
	}
	t.MemoryMB = t.size(at, p, "memory", env.MemoryMB, env.Memory)
	t.StorageMB = t.size(at, p, "storage", env.StorageMB, env.Storage)
	if env.GPUs != nil {
		if n, ok := p.asInt(at.at("environment", "gpus"), env.GPUs); ok && n > 0 {
			p.add(at.at("environment", "gpus"), "%d: troupe does not give trials GPUs", n)
		}
	}
	if env.GPUTypes != nil {
		t.GPUTypes, _ = p.asStrings(at.at("environment", "gpu_types"), env.GPUTypes)
	}
}

// mcpServers reads [[environment.mcp_servers]].
func mcpServers(at locator, p *problems, list []map[string]any) (servers []MCPServer, warnings []*located.Error) {
	for _, m := range list {
		f := at.at("environment", "mcp_servers")
		warnings = append(warnings, knownIn(at, "environment.mcp_servers", m, "name", "transport", "url", "command", "args")...)
		var s MCPServer
		s.Name, _ = p.asString(f, m["name"])
		s.Transport, _ = p.asString(f, m["transport"])
		s.URL, _ = p.asString(f, m["url"])
		s.Command, _ = p.asString(f, m["command"])
		if a, ok := m["args"]; ok {
			s.Args, _ = p.asStrings(f, a)
		}
		s.Transport = cmp.Or(s.Transport, contract.TransportSSE)
		if s.Transport == "http" {
			s.Transport = contract.TransportStreamableHTTP
		}
		if err := s.Check(); err != nil {
			p.add(f, "%v", err)
		}
		servers = append(servers, s)
	}
	return servers, warnings
}

// size reads memory_mb (MiB) or its older spelling memory ("2G"); both may
// be given only with the same value, as Harbor 1.3 requires.
func (t *Task) size(at locator, p *problems, name string, mb, old any) int64 {
	var n int64
	ok := true
	if mb != nil {
		n, ok = p.asInt(at.at("environment", name+"_mb"), mb)
	}
	if old != nil {
		f := at.at("environment", name)
		if m, okOld := p.sizeMB(f, old); okOld {
			if mb != nil && ok && m != n {
				p.add(f, "%q is %d MiB but %s_mb says %d: give one of them", old, m, name, n)
			}
			n, ok = m, ok && okOld
		}
	}
	if ok && (mb != nil || old != nil) && n <= 0 {
		p.add(at.at("environment", name+"_mb"), "must be above 0 MiB, found %d", n)
	}
	return n
}

// network reads Harbor's network policy (schema 1.3: network_mode public,
// no-network or allowlist, with allowed_hosts; allow_internet, the older
// switch) for the agents' phase and the verifier's, exactly as Harbor's
// models do (src/harbor/models/task/config.py, cited below): [environment]
// is the baseline, public unless it says otherwise; [agent] and [verifier]
// override it for their phase when they set network_mode.
func network(at locator, p *problems, tf *taskFile) (agents, verifier Network) {
	env := tf.Environment
	base := baselineNetwork(at, p, env.NetworkMode, env.AllowedHosts)
	// TaskConfig._apply_legacy_allow_internet (config.py:631-644):
	// allow_internet counts only when the table sets neither network_mode
	// nor allowed_hosts.
	if env.NetworkMode == nil && env.AllowedHosts == nil && env.AllowInternet != nil {
		if allow, ok := p.asBool(at.at("environment", "allow_internet"), env.AllowInternet); ok && !allow {
			base.Mode = NoNetwork
		}
	}
	agents, verifier = base, base
	if n, ok := phaseNetwork(at, p, "agent", tf.Agent.NetworkMode, tf.Agent.AllowedHosts); ok {
		agents = n
	}
	if n, ok := phaseNetwork(at, p, "verifier", tf.Verifier.NetworkMode, tf.Verifier.AllowedHosts); ok {
		verifier = n
	}
	return agents, verifier
}

// baselineNetwork reads [environment] network_mode and allowed_hosts as
// Harbor's BaselineNetworkPolicyConfig does: network_mode defaults to
// public (config.py:146-147), so allowed_hosts alone is public with
// hosts, which Harbor refuses (config.py:40-43, "allowed_hosts is only
// valid when network_mode='allowlist'"), and an empty allowed_hosts alone
// is public.
func baselineNetwork(at locator, p *problems, mode, hosts any) Network {
	n := Network{Mode: Public}
	if mode != nil {
		n.Mode = networkMode(at, p, "environment", mode)
	}
	return checkPolicy(at, p, "environment", n.Mode, hosts)
}

// phaseNetwork reads one phase's override ([agent], [verifier], and a
// step's) as Harbor's PhaseNetworkPolicyConfig does: the phase has its own
// network only when it sets network_mode (explicit_phase_policy), and
// allowed_hosts without network_mode is refused, even an empty list
// (config.py:96-100, _validate_network_policy_fields; config.py:134-140). ok is false when
// the phase takes the baseline's.
func phaseNetwork(at locator, p *problems, table string, mode, hosts any) (n Network, ok bool) {
	if mode == nil {
		if hosts != nil {
			p.add(at.at(table, "allowed_hosts"), "is only valid with network_mode = \"allowlist\" (Harbor refuses it otherwise too: a phase without network_mode takes [environment]'s network); add network_mode = \"allowlist\" to this table")
			checkHosts(at, p, table, hosts)
		}
		return Network{}, false
	}
	m := networkMode(at, p, table, mode)
	if m == "" {
		return Network{}, false
	}
	return checkPolicy(at, p, table, m, hosts), true
}

// networkMode reads a network_mode: one of Harbor's three, spelled as
// Harbor spells them (its enum, config.py:20-25, refuses "PUBLIC" and
// ""); "" when refused.
func networkMode(at locator, p *problems, table string, mode any) NetworkMode {
	f := at.at(table, "network_mode")
	s, ok := p.asString(f, mode)
	switch m := NetworkMode(s); {
	case !ok:
	case m == Public, m == NoNetwork, m == Allowlist:
		return m
	default:
		p.add(f, "%q is not public, no-network or allowlist", s)
	}
	return ""
}

// checkPolicy is Harbor's NetworkPolicy.validate_allowed_hosts
// (config.py:34-44) for a table whose mode is m ("" when it was refused):
// an allowlist needs hosts, and hosts need an allowlist; an empty list
// with public or no-network is accepted.
func checkPolicy(at locator, p *problems, table string, m NetworkMode, hosts any) Network {
	list, given := checkHosts(at, p, table, hosts)
	n := Network{Mode: m}
	switch {
	case m == "", hosts != nil && given < 0:
		// refused already
	case m == Allowlist && hosts == nil:
		p.add(at.at(table, "network_mode"), "\"allowlist\" needs allowed_hosts: the hosts the trial may reach")
	case m == Allowlist && given == 0:
		p.add(at.at(table, "allowed_hosts"), "must name at least one host with network_mode = \"allowlist\"")
	case m != Allowlist && given > 0:
		p.add(at.at(table, "allowed_hosts"), "is only valid with network_mode = \"allowlist\", not %q (Harbor refuses it otherwise too); make this table's network_mode \"allowlist\"", m)
	case m == Allowlist:
		n.AllowedHosts = list
	}
	return n
}

// checkHosts reads allowed_hosts as Harbor's field validator does
// (config.py:54-83, _validate_allowed_host_names, run before the mode is
// looked at): each a host name or "*." and one, normalized (trimmed, lower
// case, trailing dots dropped); a refused host is left out. given is how
// many the table lists, -1 when it lists none or not as a list.
func checkHosts(at locator, p *problems, table string, hosts any) (list []string, given int) {
	if hosts == nil {
		return nil, -1
	}
	f := at.at(table, "allowed_hosts")
	all, ok := p.asStrings(f, hosts)
	if !ok {
		return nil, -1
	}
	for _, h := range all {
		if err := checkHost(h); err != nil {
			p.add(f, "%q: %v", h, err)
			continue
		}
		list = append(list, normalHost(h))
	}
	return list, len(all)
}

// normalHost is a host as Harbor keeps it: `host.strip().lower().rstrip(".")`.
func normalHost(h string) string {
	return strings.TrimRight(strings.ToLower(strings.TrimSpace(h)), ".")
}

var hostLabel = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)

// checkHost accepts a host name, optionally with a leading "*." wildcard, as
// Harbor does; no scheme, port or path.
func checkHost(h string) error {
	h = normalHost(h)
	if h == "" || strings.ContainsAny(h, "/:") {
		return errors.New("give a host name, without a scheme, port or path")
	}
	h = strings.TrimPrefix(h, "*.")
	for _, label := range strings.Split(h, ".") {
		if !hostLabel.MatchString(label) {
			return fmt.Errorf("%q is not a host name label", label)
		}
	}
	return nil
}

// healthcheck reads [environment.healthcheck] with Harbor's defaults.
func healthcheck(at locator, p *problems, m map[string]any) *Healthcheck {
	hc := &Healthcheck{Interval: 5 * time.Second, Timeout: 30 * time.Second, StartInterval: 5 * time.Second, Retries: 3}
	f := func(key string) field { return at.at("environment.healthcheck", key) }
	cmdv, ok := m["command"]
	if !ok {
		p.add(f("command"), "is required: a shell command, exit 0 meaning healthy")
	}
	hc.Command, _ = p.asString(f("command"), cmdv)
	for key, into := range map[string]*time.Duration{"interval_sec": &hc.Interval, "timeout_sec": &hc.Timeout, "start_period_sec": &hc.StartPeriod, "start_interval_sec": &hc.StartInterval} {
		if v, ok := m[key]; ok {
			if x, ok := p.asFloat(f(key), v); ok {
				if x < 0 || x > 24*3600 {
					p.add(f(key), "must be between 0 and a day, found %v", x)
					continue
				}
				*into = time.Duration(x * float64(time.Second))
			}
		}
	}
	if v, ok := m["retries"]; ok {
		if n, ok := p.asInt(f("retries"), v); ok {
			if n < 1 || n > 1000 {
				p.add(f("retries"), "must be between 1 and 1000, found %d", n)
			}
			hc.Retries = int(n)
		}
	}
	return hc
}

// applyTroupe reads troupe's own keys, in [metadata.troupe], where Harbor
// keeps them as metadata and does nothing with them: services, what the
// sweep does with the processes the agents leave running (docs/run.md,
// "Services").
func (t *Task) applyTroupe(meta map[string]any, at locator, p *problems) {
	tr, ok := meta["troupe"].(map[string]any)
	if !ok {
		return
	}
	f := at.at("metadata.troupe", "services")
	if v, ok := p.asString(f, tr["services"]); ok && v != "" {
		switch v {
		case ServicesKeep, ServicesSweep:
			t.Services = v
		default:
			p.add(f, "%q is not %q (the agents' detached processes run on into the verifier) or %q (every agent process is ended before it)", v, ServicesKeep, ServicesSweep)
		}
	}
}
