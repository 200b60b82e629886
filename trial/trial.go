package trial

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/egress"
	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/personas"
	"github.com/troupebench/troupe/relay"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/runtime/tunnel"
	"github.com/troupebench/troupe/stack"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// Paths and ids inside a trial container.
const (
	defaultWorkdir = "/app"
	verifierLogs   = "/logs/verifier"
	artifactsDir   = "/logs/artifacts"
	testsDir       = "/tests"
	relayListen    = "127.0.0.1:3600"
	llmListen      = "127.0.0.1:3601"
	// Isolated agents run as agentUIDBase+n (n from 1, trial order) in the
	// group agentGID, which owns the shared working folder.
	agentUIDBase = 10000
	agentGID     = 10000
	// deadlineSlack: agents that all exit this close to the deadline have
	// stopped because of it.
	deadlineSlack = 5 * time.Second
	// defaultPids bounds a trial container's processes (threads included)
	// unless the manifest overrides it.
	defaultPids = 4096
)

// Waits of a trial's own, besides the phases' (Limits); the timeout
// multiplier scales them too.
const (
	// createTimeout bounds creating the container, which is never cut
	// short (see createContainer).
	createTimeout = 2 * time.Minute
	// callTimeout bounds a call into the container: preparing it, staging
	// the verifier.
	callTimeout = time.Minute
	// sweepSlack is what a sweep may take beyond its grace period.
	sweepSlack = 15 * time.Second
	// execEndTimeout is how long an agent's exec has to end once the sweep
	// killed its process.
	execEndTimeout = 5 * time.Second
)

// ErrorKind names what ended a trial early: the result's
// exception_info.exception_type.
type ErrorKind string

// The kinds of failure.
const (
	ErrProvision       ErrorKind = "ProvisionError"
	ErrImageBuild      ErrorKind = "ImageBuildError"
	ErrImageTimeout    ErrorKind = "ImageBuildTimeout"
	ErrContainer       ErrorKind = "ContainerError"
	ErrTunnel          ErrorKind = "TunnelError"
	ErrAgentStart      ErrorKind = "AgentStartError"
	ErrReadiness       ErrorKind = "ReadinessError"
	ErrRelay           ErrorKind = "RelayError"
	ErrSweep           ErrorKind = "SweepError"
	ErrCancelled       ErrorKind = "Cancelled"
	ErrVerifier        ErrorKind = "VerifierError"
	ErrVerifierTimeout ErrorKind = "VerifierTimeout"
	ErrRewardFile      ErrorKind = "RewardFileError"
	ErrUser            ErrorKind = "UserError"
	ErrHealthcheck     ErrorKind = "HealthcheckError"
)

// Env is what the trials of a job share: the runtime, the job's relay and
// gateway, troupe's own binary for the containers, and the phase limits.
type Env struct {
	Runtime runtime.Runtime
	Relay   *relay.Relay
	Gateway *llm.Gateway
	Binary  *runtime.Binary
	JobID   string
	Version string
	Limits  Limits
	// Bounds limit the files agents and verifiers fill; the zero value is
	// DefaultBounds.
	Bounds Bounds
	// Network is the user's network policy; the zero value is NetworkTask.
	Network NetworkPolicy
	// Record is how much of each model call the trial keeps; the zero value
	// is RecordFull.
	Record RecordMode
	// EgressDial is how the allowlist proxy reaches allowed hosts; nil is
	// egress's default, which never reaches the host itself (tests give
	// one that reaches a local server).
	EgressDial egress.DialFunc
}

func (e *Env) bounds() Bounds {
	if e.Bounds == (Bounds{}) {
		return DefaultBounds
	}
	return e.Bounds
}

// Limits are the phase timeouts that do not come from the task or the
// manifest; Multiplier scales every phase's timeout, those included.
type Limits struct {
	Multiplier float64
	Ready      time.Duration
	Teardown   time.Duration
	SweepGrace time.Duration
}

// DefaultLimits are troupe's phase limits.
var DefaultLimits = Limits{Multiplier: 1, Ready: 60 * time.Second, Teardown: 60 * time.Second, SweepGrace: 5 * time.Second}

func (l Limits) scale(d time.Duration) time.Duration {
	if l.Multiplier <= 0 {
		return d
	}
	return time.Duration(float64(d) * l.Multiplier)
}

// Spec is one trial to run.
type Spec struct {
	// Name is the trial folder's name: <task>__<condition>__<attempt>.
	Name string
	// Dir is the trial folder; it must not exist yet or be empty.
	Dir          string
	Team         *manifest.Team
	ManifestPath string
	Task         *task.Task
	Attempt      int
	// Oracle runs the task's solution/solve.sh instead of the team.
	Oracle bool
	// Stacks are the stacks the agents' harnesses may name beside the
	// built-in reference agent.
	Stacks stack.Set
	// Replay answers the agents' calls from a recorded trial; nil asks
	// their endpoints.
	Replay *Replay
}

// Event is a step of a trial, for progress displays and --json.
type Event struct {
	Time    time.Time       `json:"time"`
	Type    string          `json:"type"` // trial_started, phase, trial_finished
	Trial   string          `json:"trial"`
	Phase   string          `json:"phase,omitempty"`
	Outcome outcome.Outcome `json:"outcome,omitempty"`
	Reason  Reason          `json:"completion_reason,omitempty"`
	Reward  *float64        `json:"reward,omitempty"`
	CostUSD float64         `json:"cost_usd"`
	Error   string          `json:"error,omitempty"`
	// Message is a warning's text.
	Message string `json:"message,omitempty"`
}

// Event types.
const (
	EventStarted  = "trial_started"
	EventPhase    = "phase"
	EventFinished = "trial_finished"
	// EventWarning says, before the agents start, what of the task the
	// trial cannot give (a limit this runtime cannot enforce).
	EventWarning = "warning"
)

// agentRun is one agent of a running trial.
type agentRun struct {
	manifest.Agent
	stack          *stack.Stack
	sk             secret.Secret
	pk             string
	uid, gid       int
	prompt         []byte
	proc           runtime.Process
	stdout, stderr *sink
	calls          *sink
	conversation   *sink
	exited         bool
}

// run is one trial in progress. Its fields are used by the goroutine that
// called Run only, except exits, which the agents' watchers write.
type run struct {
	env   *Env
	spec  Spec
	res   *Result
	log   *slog.Logger
	emit  func(Event)
	id    string
	start time.Time

	logFile           *sink
	transcript, audit *sink
	agents            []*agentRun
	userSK            secret.Secret
	userPK            string
	ch                *relay.Channel
	gw                *llm.Trial
	container         string
	img               runtime.Image
	workdir           string
	tun               *tunnel.Tunnel
	tunClosed         bool
	deadline          time.Time
	// egress is the allowlist proxy, when a phase has one.
	egress *egress.Proxy
	// servicesOff: the relay and the gateway are closed to the container
	// (the tunnel may still carry the verifier's proxy); the tunnel's
	// goroutines read it.
	servicesOff atomic.Bool

	exits    chan int      // agent index, when its process ends
	stop     chan struct{} // ends the exit watchers
	watchers sync.WaitGroup
	creating bool  // a container may exist
	err      error // what ended the trial early
	errType  ErrorKind

	// The files untrusted bytes flow into, and the secrets they are
	// scrubbed of (nil until minted).
	sinksMu sync.Mutex
	sinks   []namedSink
	secrets *secret.Scrubber
	// servicesClosed: closeServices has run.
	servicesClosed bool
	// taskAgent is the task's [agent] user, when it names one: every agent
	// runs as it. verifier is who runs tests/test.sh.
	taskAgent *inside.User
	verifier  inside.User
	// solutionEnv is the oracle's [solution] env, resolved.
	solutionEnv map[string]string
	// sidecars are the task's running services, with what their sweep
	// spares (compose.go).
	sidecars []sidecar
}

// Run runs one trial, step by step (docs/run.md), and writes its folder:
// result.json last, atomically. It returns an error only when the result
// could not be written; everything else is in the result.
func Run(ctx context.Context, env *Env, spec Spec, emit func(Event)) (*Result, error) {
	if emit == nil {
		emit = func(Event) {}
	}
	r := &run{env: env, spec: spec, emit: emit, start: time.Now(), stop: make(chan struct{})}
	r.id = spec.Name + "-" + randomHex(4)
	m := spec.Team.Manifest
	r.res = newResult(env, spec, r.id, r.start)
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("trial %s: %w", spec.Name, err)
	}
	logFile, err := r.openSink("trial.log", env.bounds().TrialLog)
	if err != nil {
		return nil, fmt.Errorf("trial %s: %w", spec.Name, err)
	}
	r.logFile = logFile
	r.log = slog.New(slog.NewTextHandler(logFile, nil)).With("trial", r.id)
	r.res.Timeouts = r.timeouts()
	r.emit(Event{Time: r.start, Type: EventStarted, Trial: spec.Name})
	r.log.Info("trial start", "task", spec.Task.Name, "condition", m.Condition, "attempt", spec.Attempt, "manifest_sha256", m.Hash())
	if err := writeJSON(filepath.Join(spec.Dir, "config.json"), r.config()); err != nil {
		r.cleanupError("write config.json", err)
	}

	reason := r.execute(ctx)
	r.finish(ctx, reason)
	r.scrubResult()

	// Exception messages quote agents and verifiers: the result is
	// scrubbed like their files.
	data, err := json.MarshalIndent(r.res, "", "  ")
	if err == nil {
		err = writeFileAtomic(filepath.Join(spec.Dir, trialdir.Result), append(r.secrets.Scrub(data), '\n'))
	}
	if err != nil {
		logFile.Close()
		return r.res, fmt.Errorf("trial %s: %w", spec.Name, err)
	}
	r.log.Info("trial end", "completion_reason", r.res.CompletionReason, "outcome", r.res.Outcome, "cost_usd", r.res.AgentResult.CostUSD)
	logFile.Close()
	r.emit(Event{Time: time.Now(), Type: EventFinished, Trial: spec.Name, Outcome: r.res.Outcome, Reason: r.res.CompletionReason,
		Reward: r.res.Reward, CostUSD: r.res.AgentResult.CostUSD, Error: r.errMessage()})
	return r.res, nil
}

func agentUser(m *manifest.Manifest) manifest.AgentUser {
	if m.AgentUser == "" {
		return manifest.Isolated
	}
	return m.AgentUser
}

// isolated reports whether each agent has a uid of its own: the manifest's
// default, unless the task names the user its agents run as.
func (r *run) isolated() bool {
	return !r.spec.Oracle && agentUser(r.spec.Team.Manifest) == manifest.Isolated && r.taskAgent == nil
}

// timeouts are the trial's phase limits.
func (r *run) timeouts() map[string]float64 {
	return map[string]float64{
		"build":    r.env.Limits.scale(r.spec.Task.BuildTimeout).Seconds(),
		"ready":    r.env.Limits.scale(r.env.Limits.Ready).Seconds(),
		"agent":    r.agentTimeout().Seconds(),
		"verifier": r.env.Limits.scale(r.spec.Task.VerifierTimeout).Seconds(),
		"teardown": r.env.Limits.scale(r.env.Limits.Teardown).Seconds(),
	}
}

// agentTimeout is the manifest's trial timeout capped by the task's own,
// scaled by the multiplier. It runs from the agents' launch.
func (r *run) agentTimeout() time.Duration {
	d := time.Duration(r.spec.Team.Manifest.TrialBudget.TimeoutSeconds) * time.Second
	if t := r.spec.Task.AgentTimeout; t > 0 && t < d {
		d = t
	}
	return r.env.Limits.scale(d)
}

// config is the trial's config.json: what it was asked to run. No secret.
func (r *run) config() any {
	m := r.spec.Team.Manifest
	return map[string]any{
		"trial_name": r.spec.Name, "id": r.id, "job_id": r.env.JobID, "attempt": r.spec.Attempt,
		"task":     map[string]any{"name": r.spec.Task.Name, "path": r.spec.Task.Dir, "checksum": r.spec.Task.Digest},
		"manifest": map[string]any{"path": r.spec.ManifestPath, "condition": m.Condition, "sha256": m.Hash()},
		"timeouts": r.res.Timeouts, "agent_user": r.res.AgentUser, "troupe_version": r.env.Version,
	}
}

// phase starts a phase: it stamps the result and tells the job.
func (r *run) phase(name string, t *Timing) {
	now := time.Now()
	t.StartedAt = &now
	r.log.Info("phase", "phase", name)
	r.emit(Event{Time: now, Type: EventPhase, Trial: r.spec.Name, Phase: name})
}

func endPhase(t *Timing) {
	if t.StartedAt != nil && t.FinishedAt == nil {
		now := time.Now()
		t.FinishedAt = &now
	}
}

// fail records what ended the trial early; the first failure wins.
func (r *run) fail(kind ErrorKind, err error) {
	if r.err == nil {
		r.err, r.errType = err, kind
		r.log.Error("trial failed", "type", kind, "err", err.Error())
	}
}

func (r *run) errMessage() string {
	if r.err == nil {
		return ""
	}
	return string(r.secrets.Scrub([]byte(r.err.Error())))
}

// scrubResult replaces the trial's secrets in the messages of its result,
// which quote agents, verifiers and upstreams: they go to the terminal, the
// job's log and NDJSON events as well as to result.json.
func (r *run) scrubResult() {
	if e := r.res.ExceptionInfo; e != nil {
		e.ExceptionMessage = string(r.secrets.Scrub([]byte(e.ExceptionMessage)))
		e.ExceptionTraceback = string(r.secrets.Scrub([]byte(e.ExceptionTraceback)))
	}
	for i, msg := range r.res.CleanupErrors {
		r.res.CleanupErrors[i] = string(r.secrets.Scrub([]byte(msg)))
	}
}

func (r *run) cleanupError(what string, err error) {
	msg := what + ": " + err.Error()
	r.res.CleanupErrors = append(r.res.CleanupErrors, msg)
	r.log.Error("cleanup", "err", msg)
}

// execute runs steps 1 to 7 and returns the completion reason.
func (r *run) execute(ctx context.Context) Reason {
	broken := func(kind ErrorKind, err error) Reason {
		if ctx.Err() != nil {
			r.fail(ErrCancelled, context.Cause(ctx))
			return Cancelled
		}
		r.fail(kind, err)
		return InfraError
	}
	r.phase("environment_setup", &r.res.EnvironmentSetup)
	r.planNetwork()
	provision := r.provision
	if r.spec.Oracle {
		provision = r.provisionOracle
	}
	if err := provision(); err != nil {
		return broken(ErrProvision, err)
	}
	if err := r.startEgress(); err != nil {
		return broken(ErrProvision, err)
	}
	if kind, err := r.createContainer(ctx); err != nil {
		return broken(kind, err)
	}
	if err := r.openTunnel(ctx); err != nil {
		return broken(ErrTunnel, err)
	}
	if err := r.resolveUsers(ctx); err != nil {
		return broken(ErrUser, err)
	}
	if err := r.prepare(ctx); err != nil {
		return broken(ErrContainer, err)
	}
	if err := r.healthcheck(ctx); err != nil {
		return broken(ErrHealthcheck, err)
	}
	if err := r.listSidecars(ctx); err != nil {
		return broken(ErrContainer, err)
	}
	endPhase(&r.res.EnvironmentSetup)

	r.phase("agent_setup", &r.res.AgentSetup)
	if r.spec.Oracle {
		if err := r.launchOracle(ctx); err != nil {
			return broken(ErrAgentStart, err)
		}
		endPhase(&r.res.AgentSetup)
		r.phase("agent_execution", &r.res.AgentExecution)
		reason := r.watchOracle(ctx)
		endPhase(&r.res.AgentExecution)
		return reason
	}
	if err := r.launch(ctx); err != nil {
		return broken(ErrAgentStart, err)
	}
	if err := r.waitReady(ctx); err != nil {
		return broken(ErrReadiness, err)
	}
	endPhase(&r.res.AgentSetup)

	r.phase("agent_execution", &r.res.AgentExecution)
	reason := r.watch(ctx)
	endPhase(&r.res.AgentExecution)
	return reason
}

// provision makes the trial's identities, prompts, channel and tokens.
func (r *run) provision() error {
	team := r.spec.Team
	bounds := r.env.bounds()
	sk := nostr.GeneratePrivateKey()
	r.userSK = secret.New(sk)
	r.userPK, _ = nostr.GetPublicKey(sk)
	minted := keyForms(sk)
	var members []personas.Member
	for i, a := range team.Agents {
		st, err := r.spec.Stacks.Resolve(string(a.Harness))
		if err != nil {
			return fmt.Errorf("agent %s: %w", a.ID, err)
		}
		sk := nostr.GeneratePrivateKey()
		ar := &agentRun{Agent: a, stack: st, sk: secret.New(sk)}
		ar.pk, _ = nostr.GetPublicKey(sk)
		minted = append(minted, keyForms(sk)...)
		if r.isolated() {
			ar.uid, ar.gid = agentUIDBase+i+1, agentGID
		}
		r.agents = append(r.agents, ar)
		members = append(members, personas.Member{ID: a.ID, Role: a.Role, Kind: string(a.Kind), Pubkey: ar.pk})
	}
	user := personas.Member{ID: "user", Role: "user", Kind: "user", Pubkey: r.userPK}
	for i, ar := range r.agents {
		ar.prompt = personas.Compose(ar.Prompt, personas.Context{Self: members[i], Channel: r.id, User: user, Team: members})
		dir := filepath.Join(r.spec.Dir, "agents", ar.ID)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "system-prompt.md"), ar.prompt, 0o644); err != nil {
			return err
		}
		var err error
		agentDir := path.Join("agents", ar.ID)
		if ar.stdout, err = r.openSink(path.Join(agentDir, "stdout.log"), bounds.AgentOutput); err != nil {
			return err
		}
		if ar.stderr, err = r.openSink(path.Join(agentDir, "stderr.log"), bounds.AgentOutput); err != nil {
			return err
		}
		if r.env.Record != RecordNone {
			if ar.calls, err = r.openSink(path.Join(agentDir, "llm-calls.jsonl"), bounds.Calls); err != nil {
				return err
			}
		}
		if r.env.Record.full() {
			if ar.conversation, err = r.openSink(path.Join(agentDir, conversationFile), bounds.Conversation); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(r.spec.Dir, "relay"), 0o755); err != nil {
		return err
	}
	var err error
	if r.transcript, err = r.openSink(trialdir.Transcript, bounds.Transcript); err != nil {
		return err
	}
	if r.audit, err = r.openSink(trialdir.Audit, bounds.Audit); err != nil {
		return err
	}
	// Who holds which key, public from the start, so that troupe view can
	// name the speakers of a trial that has no result.json yet.
	var roster []trialdir.Member
	for _, m := range append([]personas.Member{user}, members...) {
		roster = append(roster, trialdir.Member(m))
	}
	var buf bytes.Buffer
	if err := trialdir.WriteMembers(&buf, roster); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(r.spec.Dir, filepath.FromSlash(trialdir.Members)), buf.Bytes()); err != nil {
		return err
	}

	var relayMembers []relay.Member
	var specs []llm.AgentSpec
	for _, ar := range r.agents {
		relayMembers = append(relayMembers, relay.Member{Pubkey: ar.pk, ID: ar.ID, Role: ar.Role, Kind: string(ar.Kind)})
		specs = append(specs, llm.AgentSpec{ID: ar.ID, Role: ar.Role, Kind: string(ar.Kind), Pubkey: ar.pk, Endpoint: ar.Endpoint, Budget: ar.Budget, Log: optional(ar.calls), Conversation: optional(ar.conversation)})
	}
	// Values the task took from the host are as secret as what troupe
	// minted.
	for _, v := range r.spec.Task.FromHost {
		minted = append(minted, v)
	}
	m := team.Manifest
	gspec := llm.TrialSpec{ID: r.id, Name: r.spec.Name, Channel: r.id, UserPubkey: r.userPK, Agents: specs, Prices: m.Prices, MaxCostUSD: m.TrialBudget.MaxCostUSD,
		Lead: r.agents[0].ID, Secrets: slices.Clone(minted)}
	if rp := r.spec.Replay; rp != nil {
		pubkeys := map[string]string{"user": r.userPK}
		for _, ar := range r.agents {
			pubkeys[ar.ID] = ar.pk
		}
		gspec.Replay = rp.gateway(r.id, pubkeys)
	}
	r.gw, err = r.env.Gateway.OpenTrial(gspec)
	if err != nil {
		return fmt.Errorf("mint gateway tokens: %w", err)
	}
	for _, ar := range r.agents {
		token := r.gw.Token(ar.ID)
		minted = append(minted, token, secret.New(strings.ToUpper(token.Reveal())))
	}
	// Every secret is minted: from now on no file of the trial and no
	// message of the channel may hold one.
	r.armSinks(minted)
	r.ch, err = r.env.Relay.OpenChannel(relay.ChannelConfig{
		ID: r.id, Name: r.spec.Name, About: fmt.Sprintf("job=%s task=%s condition=%s manifest=%s", r.env.JobID, r.spec.Task.Name, m.Condition, m.Hash()),
		Members: relayMembers, UserPubkey: r.userPK, UserSecretKey: r.userSK, Orchestrator: r.agents[0].pk,
		Transcript: r.transcript, Audit: r.audit, Secrets: r.secrets,
		// The DONE: freezes the model calls before the orchestrator hears
		// it was accepted: no turn starts after it, and the turns in
		// progress end (the lead's own, with the call after its DONE:), so
		// what the trial used does not depend on the timing.
		OnDone: func() { r.gw.FreezeAfterTurns(string(DeclaredDone)) },
	})
	if err != nil {
		return fmt.Errorf("open the trial channel: %w", err)
	}
	for _, ar := range r.agents {
		r.res.Agents = append(r.res.Agents, AgentRecord{ID: ar.ID, ClassID: ar.ClassID, Kind: string(ar.Kind), Role: ar.Role, Endpoint: ar.Endpoint, Pubkey: ar.pk, UID: ar.uid,
			Stack: ar.stack.Name, StackDigest: ar.stack.Digest()})
	}
	return nil
}

// createContainer resolves the image and starts the container with the
// binary, the agents' secrets and the shared working folder in place.
func (r *run) createContainer(ctx context.Context) (ErrorKind, error) {
	rt, task := r.env.Runtime, r.spec.Task
	bctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(task.BuildTimeout))
	img, err := rt.Image(bctx, imageSpec(task))
	var services []runtime.ServiceSpec
	var dependsOn []runtime.Dependency
	if err == nil {
		services, dependsOn, err = r.services(bctx)
	}
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return ErrImageTimeout, fmt.Errorf("the image was not ready within %s: %w", r.env.Limits.scale(task.BuildTimeout), err)
		}
		return ErrImageBuild, err
	}
	r.img = img
	r.workdir = cmp.Or(task.Workdir, img.WorkDir, defaultWorkdir)
	// The stacks' install scripts first, each in a container of its own:
	// the trial's starts from the image they made (install.go).
	if kind, err := r.install(ctx); err != nil {
		return kind, err
	}
	spec := runtime.ContainerSpec{
		Image: r.img.Ref, Entrypoint: []string{runtime.BinaryPath, "init"}, User: "0:0", WorkDir: r.workdir, Binary: r.env.Binary,
		Labels:   map[string]string{runtime.LabelJob: r.env.JobID, runtime.LabelTrial: r.id},
		Env:      containerEnv(task),
		Network:  r.containerNetwork(),
		Services: services, DependsOn: dependsOn,
		StorageMB: r.storageLimit(ctx, r.img.Ref),
	}
	spec.CPUs, spec.MemoryMB, spec.Pids = r.limits()
	// A create is not interrupted: cancelled in flight, the engine may still
	// make the container after the client stopped listening, leaving one
	// nobody knows the id of. It is quick; the cancellation is seen after.
	// Services are waited for, and that may be cut short: what Create
	// made is removed by it, or found by the trial's label (removeByLabel).
	r.creating = true
	cbase := context.WithoutCancel(ctx)
	if len(services) > 0 {
		cbase = ctx
	}
	cctx, cancelCreate := context.WithTimeout(cbase, r.env.Limits.scale(createTimeout))
	id, err := rt.Create(cctx, spec)
	cancelCreate()
	if err != nil {
		return ErrContainer, err
	}
	r.container = id
	if err := ctx.Err(); err != nil {
		return ErrCancelled, err
	}
	r.log.Info("container", "id", id, "image", r.img.Ref, "workdir", r.workdir, "network", spec.Network, "agents", r.agentNet().Mode, "verifier", r.verifierNet().Mode)
	if spec.Network == runtime.NetworkBridge && !r.agentsOnline() {
		// The internet is the verifier's only: the agents start offline.
		if err := rt.SetOnline(ctx, id, false); err != nil {
			return ErrContainer, err
		}
	}
	if err := rt.Start(ctx, id); err != nil {
		return ErrContainer, err
	}
	r.log.Info("container started")
	return "", nil
}

// prepare unpacks the agents' files in the container and, for isolated
// agents, makes the working folder writable by all of them. It is a call
// through the tunnel, which runs as root: no exec, no copy through the
// engine (each costs about 50 ms).
func (r *run) prepare(ctx context.Context) error {
	var opts struct {
		Share string `json:"share,omitempty"`
		GID   int    `json:"gid,omitempty"`
	}
	if r.isolated() {
		opts.Share, opts.GID = r.workdir, agentGID
	}
	arg, _ := json.Marshal(opts)
	inFiles := r.containerFiles()
	uploads, err := r.stackFiles()
	if err != nil {
		return fmt.Errorf("prepare the container: %w", err)
	}
	inFiles = append(inFiles, uploads...)
	if r.spec.Oracle {
		sol, err := r.solutionFiles()
		if err != nil {
			return fmt.Errorf("prepare the container: %w", err)
		}
		inFiles = append(inFiles, sol...)
	}
	var files bytes.Buffer
	if err := runtime.WriteTar(&files, inFiles); err != nil {
		return fmt.Errorf("prepare the container: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(callTimeout))
	defer cancel()
	if _, err := r.tun.Call(cctx, "prepare", string(arg), files.Bytes()); err != nil {
		return fmt.Errorf("prepare the container: %w", err)
	}
	r.log.Info("container prepared", "workdir", r.workdir, "shared", r.isolated())
	return nil
}

// containerFiles are what prepare unpacks: each agent's key, token and
// prompt readable by it alone, its home, and the log folders. troupe's
// binary comes with the container (ContainerSpec.Binary).
func (r *run) containerFiles() []runtime.File {
	gid := 0
	if r.isolated() {
		gid = agentGID
	}
	files := []runtime.File{
		{Path: "/run/troupe", Mode: fs.ModeDir | 0o755},
		{Path: contract.SecretsDir, Mode: fs.ModeDir | 0o755},
		{Path: contract.HomesDir, Mode: fs.ModeDir | 0o755},
		{Path: "/logs", Mode: fs.ModeDir | 0o755},
		{Path: verifierLogs, Mode: fs.ModeDir | 0o755},
		{Path: artifactsDir, Mode: fs.ModeDir | fs.ModeSetgid | 0o775, GID: gid},
	}
	if r.spec.Oracle {
		return files // no keys, tokens or prompts
	}
	for _, ar := range r.agents {
		dir := contract.Dir(ar.ID)
		files = append(files,
			runtime.File{Path: dir, Mode: fs.ModeDir | 0o500, UID: ar.uid, GID: ar.uid},
			runtime.File{Path: path.Join(dir, contract.KeyFile), Data: []byte(ar.sk.Reveal() + "\n"), Mode: 0o400, UID: ar.uid, GID: ar.uid},
			runtime.File{Path: path.Join(dir, contract.TokenFile), Data: []byte(r.gw.Token(ar.ID).Reveal() + "\n"), Mode: 0o400, UID: ar.uid, GID: ar.uid},
			runtime.File{Path: path.Join(dir, contract.PromptFile), Data: ar.prompt, Mode: 0o400, UID: ar.uid, GID: ar.uid},
			runtime.File{Path: contract.Home(ar.ID), Mode: fs.ModeDir | 0o700, UID: ar.uid, GID: ar.uid},
		)
	}
	return files
}

// maxRounds is the contract's round limit: the manifest's budget.max_calls,
// as the original system used it (0: the agent's default).
func maxRounds(b manifest.Budget) int {
	if b.MaxCalls == nil {
		return 0
	}
	return int(*b.MaxCalls)
}

// generation is the contract's form of a class's generation settings.
func generation(g manifest.Generation) contract.Generation {
	out := contract.Generation{ThinkingEffort: g.ThinkingEffort, Extra: g.Extra}
	for _, f := range []struct {
		from *int64
		into *int64
	}{{g.MaxOutputTokens, &out.MaxOutputTokens}, {g.ContextWindowTokens, &out.ContextWindowTokens}, {g.CompactAtPercent, &out.CompactAtPercent}, {g.CompactAtTokens, &out.CompactAtTokens}} {
		if f.from != nil {
			*f.into = *f.from
		}
	}
	return out
}

// stackFiles are the files of the stacks the agents run, each stack's
// once, checked against their digests again (a file may have changed since
// the job started).
func (r *run) stackFiles() ([]runtime.File, error) {
	var out []runtime.File
	seen := map[string]bool{}
	for _, ar := range r.agents {
		if ar.stack == nil || seen[ar.stack.Name] {
			continue
		}
		seen[ar.stack.Name] = true
		files, err := ar.stack.Verify()
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

// openTunnel connects the container's relay and gateway ports to the job's
// (not for the oracle, which uses neither), and the egress proxy's.
func (r *run) openTunnel(ctx context.Context) error {
	var relayAddr, llmAddr string
	var listens []tunnel.Listen
	if !r.spec.Oracle {
		var err error
		if relayAddr, err = hostPort(r.env.Relay.URL()); err != nil {
			return err
		}
		if llmAddr, err = hostPort(r.env.Gateway.URL()); err != nil {
			return err
		}
		listens = []tunnel.Listen{{Addr: relayListen, Name: "relay"}, {Addr: llmListen, Name: "llm"}}
	}
	var d net.Dialer
	dial := func(ctx context.Context, name string) (net.Conn, error) {
		switch {
		case name == "proxy" && r.egress != nil:
			return d.DialContext(ctx, "tcp", r.egress.Addr())
		case r.servicesOff.Load():
			return nil, fmt.Errorf("%s is closed: the agents' work has ended", name)
		case name == "relay" && relayAddr != "":
			return d.DialContext(ctx, "tcp", relayAddr)
		case name == "llm" && llmAddr != "":
			return d.DialContext(ctx, "tcp", llmAddr)
		}
		return nil, fmt.Errorf("no target %q", name)
	}
	if r.egress != nil {
		listens = append(listens, tunnel.Listen{Addr: proxyListen, Name: "proxy"})
	}
	var err error
	r.tun, err = tunnel.Open(ctx, r.env.Runtime, r.container, runtime.BinaryPath, listens, dial, tunnel.Options{Logger: r.log})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(r.env.Limits.Ready))
	defer cancel()
	if err := r.tun.WaitReady(rctx); err != nil {
		return err
	}
	r.log.Info("tunnel ready")
	return nil
}

func hostPort(u string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("address %s: %w", u, err)
	}
	return parsed.Host, nil
}

// launch starts one exec per agent, with the stack contract's environment.
func (r *run) launch(ctx context.Context) error {
	r.deadline = time.Now().Add(r.agentTimeout())
	r.exits = make(chan int, len(r.agents))
	for i, ar := range r.agents {
		cmd, env := ar.stack.Launch(contract.Values{
			AgentID: ar.ID, RelayURL: relay.ContainerURL, Channel: r.id, LLMBaseURL: llm.ContainerURL + "/v1",
			Model: ar.Endpoint, Workdir: r.workdir, Deadline: r.deadline,
			MaxRounds: maxRounds(ar.Budget), Generation: generation(ar.Generation),
		}, ar.sk.Reveal(), r.gw.Token(ar.ID).Reveal())
		env = append(env, proxyEnv(r.agentNet())...)
		user := fmt.Sprintf("%d:%d", ar.uid, ar.gid)
		// Not ctx: a cancelled job must not cut an exec half-started (the
		// sweep would then find runc's init, and the exec never end). The
		// agents are stopped by the sweep, like on any other ending.
		p, err := r.env.Runtime.Exec(context.WithoutCancel(ctx), r.container, runtime.ExecSpec{
			Cmd: cmd, Env: env, User: user, WorkDir: r.workdir, Stdout: ar.stdout, Stderr: ar.stderr,
		})
		if err != nil {
			return fmt.Errorf("start agent %s: %w", ar.ID, err)
		}
		ar.proc = p
		r.watchers.Go(func() {
			select {
			case <-p.Done():
				r.exits <- i
			case <-r.stop:
			}
		})
	}
	r.log.Info("agents launched", "count", len(r.agents), "deadline", r.deadline.Format(time.RFC3339))
	return nil
}

// exited records an agent's end.
func (r *run) exited(i int) *agentRun {
	ar := r.agents[i]
	ar.exited = true
	code, err := ar.proc.Wait(context.Background())
	if err == nil {
		r.res.Agents[i].ExitCode = &code
	}
	r.log.Info("agent exited", "agent", ar.ID, "code", code)
	return ar
}

// waitReady waits until every agent has authenticated and subscribed.
func (r *run) waitReady(ctx context.Context) error {
	limit := r.env.Limits.scale(r.env.Limits.Ready)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		_, missing, changed := r.ch.Readiness()
		if len(missing) == 0 {
			r.log.Info("agents ready")
			return nil
		}
		select {
		case <-changed:
		case i := <-r.exits:
			ar := r.exited(i)
			return fmt.Errorf("agent %s exited before it was ready; its last words: %s", ar.ID, lastWords(ar.stderr.Name(), 600))
		case <-timer.C:
			return fmt.Errorf("agents %s were not ready within %s (authenticated with a live subscription to the channel)", strings.Join(missing, ", "), limit)
		case <-r.tun.Done():
			return fmt.Errorf("the tunnel ended: %s", r.tun.Stderr())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watch posts the task and waits for the first thing that ends the
// agents' work.
func (r *run) watch(ctx context.Context) Reason {
	orch := r.agents[0]
	if _, err := r.ch.Post(ctx, r.spec.Task.Instruction, orch.pk); err != nil {
		if ctx.Err() != nil {
			return Cancelled
		}
		r.fail(ErrRelay, fmt.Errorf("post the task: %w", err))
		return InfraError
	}
	r.log.Info("task posted", "to", orch.ID)
	timer := time.NewTimer(time.Until(r.deadline))
	defer timer.Stop()
	exhausted := r.gw.Exhausted()
	diverged := r.gw.Diverged() // nil, which never receives, unless a replay
	for {
		select {
		case d := <-diverged:
			r.log.Info("replay diverged", "agent", d.Agent, "call", d.Call, "why", d.Why)
			if r.spec.Replay.OnDivergence == llm.DivergeStop {
				r.fail(ErrReplayDiverged, fmt.Errorf("call %d of agent %s left its recording (%s), and --on-divergence stop ends the replay there", d.Call, d.Agent, d.Why))
				return ReplayDiverged
			}
		case <-r.ch.Done():
			r.log.Info("declared done", "content", r.ch.DoneEvent().Content)
			return r.endDecision(DeclaredDone)
		case <-timer.C:
			r.log.Info("deadline")
			return r.endDecision(Deadline)
		case ex := <-exhausted:
			r.log.Info("budget exhausted", "agent", ex.Agent, "budget", ex.Budget, "spent", ex.Spent, "limit", ex.Limit)
			// A worker out of budget idles (the result records it); the
			// orchestrator may still finish. The orchestrator's budget, or
			// the trial's, froze the trial when it was spent, and ends it.
			if ex.Agent == "" || ex.Agent == orch.ID {
				return r.endDecision(BudgetExhausted)
			}
		case i := <-r.exits:
			r.exited(i)
			if r.allExited() {
				// Agents stop a little before their deadline (the reference
				// agent 2s): exiting then is the deadline's doing.
				if time.Until(r.deadline) < deadlineSlack {
					return r.endDecision(Deadline)
				}
				return r.endDecision(AgentsExited)
			}
		case <-r.tun.Done():
			r.fail(ErrTunnel, fmt.Errorf("the tunnel ended during the trial: %s", r.tun.Stderr()))
			return InfraError
		case <-ctx.Done():
			return Cancelled
		}
	}
}

// endDecision freezes the trial's model calls for reason and returns the
// reason of the first freeze: the orchestrator's or the trial's budget
// spent (which froze the calls the moment it was), or the orchestrator's
// DONE: (which froze them before it was acknowledged), whichever came
// first; else reason. So the completion reason and the usage never depend
// on how soon this loop reads what happened.
func (r *run) endDecision(reason Reason) Reason {
	first := r.gw.Freeze(string(reason))
	switch {
	case first.Spent != nil:
		return BudgetExhausted
	case first.Cause == string(DeclaredDone):
		return DeclaredDone
	}
	return reason
}

func (r *run) allExited() bool {
	for _, ar := range r.agents {
		if !ar.exited {
			return false
		}
	}
	return true
}

// finish runs steps 8 to 11: sweep, check, verify, collect, teardown; then fills
// in the result.
func (r *run) finish(ctx context.Context, reason Reason) {
	// Cleanup runs under its own context: a cancelled job still sweeps and
	// removes what it started.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.env.Limits.scale(r.env.Limits.Teardown))
	defer cancel()
	endPhase(&r.res.EnvironmentSetup)
	endPhase(&r.res.AgentSetup)
	endPhase(&r.res.AgentExecution)
	if r.gw != nil {
		// The calls admitted before the end decision (and after a DONE:,
		// those that end the turns it found in progress) are settled before
		// the sweep, so the usage is theirs, every time; later ones are
		// refused.
		r.gw.Freeze(string(reason))
		if n := r.gw.Settle(cctx); n > 0 {
			r.log.Warn("model calls still in flight after the settle grace: the gateway's close ends them", "calls", n)
		}
	}
	var sweepErr error
	if r.container != "" && len(r.agents) > 0 && r.agents[0].proc != nil {
		sweepErr = r.sweep(cctx)
		// Then the services: the agents' own processes are gone, so none
		// can start another there while they are swept.
		sweepErr = errors.Join(sweepErr, r.sweepSidecars(cctx))
		r.log.Info("swept", "ok", sweepErr == nil)
	}
	r.stopWatchers()

	if sweepErr != nil && (reason == Cancelled || reason == InfraError || ctx.Err() != nil) {
		// No verdict is taken anyway; the failure is still on the record.
		r.cleanupError("sweep", sweepErr)
	}
	result := outcome.Cancelled
	switch {
	case reason == Cancelled || ctx.Err() != nil:
		reason = Cancelled
		if r.err == nil {
			r.fail(ErrCancelled, errors.New("the job was interrupted"))
		}
	case reason == InfraError:
		result = outcome.UnscoredInfra
	case reason == ReplayDiverged:
		// What the team did from there is not the recording's: no verdict.
		if sweepErr != nil {
			r.cleanupError("sweep", sweepErr)
		}
	case sweepErr != nil:
		// Agent code may still run: whatever the verifier found now could
		// be the agents' doing during the verification.
		r.fail(ErrSweep, sweepErr)
		result = outcome.UnscoredInfra
	default:
		result = r.verify(ctx, cctx)
	}
	r.closeServices(cctx)
	r.closeTunnel()
	r.stopEgress()
	r.closeSinks()
	r.compressConversations()
	if r.container != "" {
		r.phase("teardown", &r.res.Teardown)
		if err := r.env.Runtime.Remove(cctx, runtime.Resource{Kind: runtime.KindContainer, ID: r.container}); err != nil {
			r.cleanupError("remove the container", err)
		}
		r.log.Info("container removed")
		endPhase(&r.res.Teardown)
	}
	if r.creating {
		// A create cancelled in flight may have made a container whose id
		// never came back: find it by the trial's label.
		r.removeByLabel(cctx)
	}
	r.res.CompletionReason, r.res.Outcome = reason, result
	r.res.FinishedAt = time.Now()
	if r.err != nil {
		r.res.ExceptionInfo = newExceptionInfo(r.errType, r.err, time.Now())
	}
}

// sweep ends every agent process (step 8), then waits for their execs. An
// error means agent code may still run, and the trial is not verified: the
// sweep could not run, or processes survived its KILL.
func (r *run) sweep(ctx context.Context) error {
	grace := r.env.Limits.SweepGrace
	wctx, cancel := context.WithTimeout(ctx, grace+r.env.Limits.scale(sweepSlack))
	out, err := r.callInside(wctx, "sweep", grace.String(), nil)
	cancel()
	if err != nil {
		return fmt.Errorf("sweep the container: %w", err)
	}
	var rep inside.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return fmt.Errorf("read the sweep's report: %w", err)
	}
	r.res.Sweep = &rep
	for _, p := range rep.Signalled {
		if p.Note != "" {
			r.log.Warn("swept a process", "pid", p.PID, "uid", p.UID, "cmd", clip.Head(p.Cmd, 200), "note", p.Note)
		}
	}
	if n := len(rep.Survivors); n > 0 {
		return fmt.Errorf("%d processes survived KILL (first: pid %d, %s): the verifier was not run while agent code may still act", n, rep.Survivors[0].PID, clip.Head(rep.Survivors[0].Cmd, 120))
	}
	// The agents' execs end with their processes.
	limit := r.env.Limits.scale(execEndTimeout)
	for i, ar := range r.agents {
		if ar.proc == nil || ar.exited {
			continue
		}
		select {
		case <-ar.proc.Done():
			r.exited(i)
		case <-time.After(limit):
			r.cleanupError("sweep", fmt.Errorf("agent %s's exec did not end within %s of the sweep", ar.ID, limit))
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// callInside runs one of troupe's calls inside the container (cmd/troupe's
// tunnelCalls): through the tunnel while it runs, else as `troupe call` in an
// exec of its own — an agent running as root may have killed the tunnel.
func (r *run) callInside(ctx context.Context, name, arg string, in []byte) ([]byte, error) {
	if r.tun != nil {
		select {
		case <-r.tun.Done():
		default:
			return r.tun.Call(ctx, name, arg, in)
		}
	}
	return r.execCallIn(ctx, r.container, name, arg, in)
}

// execCall runs one of troupe's calls in container id, in an exec of its
// own (an install's container has no tunnel).
func (r *run) execCall(ctx context.Context, id, name, arg string) ([]byte, error) {
	return r.execCallIn(ctx, id, name, arg, nil)
}

func (r *run) execCallIn(ctx context.Context, id, name, arg string, in []byte) ([]byte, error) {
	return r.execTroupe(ctx, id, []string{runtime.BinaryPath, "call", name, arg}, in)
}

// execTroupe runs troupe's binary as root in a container of the trial
// (the trial's, a service's or an install's) with in on its standard
// input, and returns its standard output.
func (r *run) execTroupe(ctx context.Context, id string, cmd []string, in []byte) ([]byte, error) {
	var out, errOut bytes.Buffer
	p, err := r.env.Runtime.Exec(ctx, id, runtime.ExecSpec{
		Cmd: cmd, User: "0:0", Stdin: true, Stdout: &out, Stderr: &errOut,
	})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	_, werr := p.Stdin().Write(in)
	if cerr := p.Stdin().Close(); werr == nil {
		werr = cerr
	}
	code, err := p.Wait(ctx)
	switch {
	case err != nil:
		return nil, err
	case code != 0:
		return nil, fmt.Errorf("troupe %s: exit %d: %s", strings.Join(cmd[1:], " "), code, clip.Head(strings.TrimSpace(errOut.String()), 600))
	case werr != nil:
		return nil, fmt.Errorf("troupe %s: send its input: %w", strings.Join(cmd[1:], " "), werr)
	}
	return out.Bytes(), nil
}

func (r *run) stopWatchers() {
	close(r.stop)
	r.watchers.Wait()
	for _, ar := range r.agents {
		if ar.proc != nil {
			ar.proc.Close()
		}
	}
}

// closeServices ends the trial's tunnel, channel and tokens, recording the
// usage and relay counts. It runs once; the verifier runs it before
// tests/test.sh, so that nothing in the container reaches them then.
func (r *run) closeServices(ctx context.Context) {
	if r.servicesClosed {
		return
	}
	r.servicesClosed = true
	r.servicesOff.Store(true)
	if r.egress == nil || r.verifierNet().Mode != task.Allowlist {
		r.closeTunnel()
	}
	if r.ch != nil {
		stats := r.ch.Stats()
		r.res.Relay = RelayCounts{Events: stats.Events, IgnoredDone: stats.IgnoredDone, Refusals: stats.Refusals, IdentityConflicts: stats.IdentityConflicts}
		if ev := r.ch.DoneEvent(); ev != nil {
			r.res.Done = &Done{EventID: ev.ID, Content: ev.Content, At: ev.CreatedAt.Time()}
		}
		if err := r.env.Relay.CloseChannel(r.id); err != nil {
			r.cleanupError("close the channel", err)
		}
	}
	if r.gw != nil {
		if err := r.gw.Close(ctx); err != nil {
			r.cleanupError("revoke the gateway tokens", err)
		}
		perAgent, total := r.gw.Usage()
		spent, trialSpent := r.gw.Spent()
		for i := range r.res.Agents {
			r.res.Agents[i].Usage = perAgent[r.res.Agents[i].ID]
			r.res.Agents[i].BudgetExhausted = spent[r.res.Agents[i].ID].Budget
		}
		r.res.TrialBudgetExhausted = trialSpent != nil
		r.res.AgentResult = AgentResult{NInputTokens: total.InputTokens, NCacheTokens: total.CachedTokens, NOutputTokens: total.OutputTokens, CostUSD: total.CostUSD, NCalls: total.Calls}
		if rp := r.spec.Replay; rp != nil {
			r.res.Replay = &ReplayRecord{Source: rp.Dir, RecordedOutcome: rp.Recorded.Outcome, ReplayReport: r.gw.ReplayReport()}
		}
	}
}

// closeTunnel ends the tunnel, once: before the verifier, unless the
// verifier's proxy goes through it; else after.
func (r *run) closeTunnel() {
	if r.tun == nil || r.tunClosed {
		return
	}
	r.tunClosed = true
	if err := r.tun.Close(); err != nil {
		r.cleanupError("close the tunnel", err)
	}
	stats := r.tun.Stats()
	r.res.Tunnel = &stats
}

func (r *run) removeByLabel(ctx context.Context) {
	left, err := r.env.Runtime.List(ctx, map[string]string{runtime.LabelTrial: r.id})
	if err != nil {
		r.cleanupError("look for the trial's containers", err)
		return
	}
	for _, res := range left {
		if res.ID == r.container && res.Kind == runtime.KindContainer {
			continue // removed above; a failure there is recorded
		}
		if err := r.env.Runtime.Remove(ctx, res); err != nil {
			r.cleanupError("remove "+res.String(), err)
		}
	}
}

// lastWords returns the end of a log, for error messages.
func lastWords(file string, n int) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if s := strings.TrimSpace(string(data)); s != "" {
		return clip.Tail(s, n)
	}
	return "(nothing)"
}

// envList is an env table as an exec or a container takes it, in order.
func envList(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
