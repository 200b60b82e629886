package trial

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupebench/troupe/egress"
	"github.com/troupebench/troupe/internal/atomicfile"
	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/modelcall"
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
// exception_info.exception_type, a type of the result's format
// (trialdir.ErrorKind) whose values are the trial's.
type ErrorKind = trialdir.ErrorKind

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
	// A model call the harness could not answer (llm.Unanswerable): its
	// endpoint unreachable, its key refused, a mock scenario with no step
	// for it.
	ErrEndpointUnreachable ErrorKind = "EndpointUnreachable"
	ErrEndpointAuth        ErrorKind = "EndpointAuthError"
	ErrMockScenario        ErrorKind = "MockScenarioError"
)

// Backend is what a trial needs of a container backend (runtime/docker,
// runtime/kubernetes): its name and isolation for the record, images,
// containers made (the handle does the rest) and found again by label, and
// a resource removed. A trial discovers what only some backends can do by
// type assertion: on the backend, StorageLimit and CommitOnce; on the
// container, Changes and Sidecars. (A job asks for EndJob the same way.)
type Backend interface {
	Name() string
	Isolation() runtime.Isolation
	Image(ctx context.Context, spec runtime.ImageSpec) (runtime.Image, error)
	Create(ctx context.Context, spec runtime.ContainerSpec) (runtime.Container, error)
	List(ctx context.Context, labels map[string]string) ([]runtime.Resource, error)
	Remove(ctx context.Context, r runtime.Resource) error
}

// Env is what the trials of a job share: the container backend, the job's
// relay and gateway, troupe's own binary for the containers, and the
// phase limits.
type Env struct {
	Runtime Backend
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
	// HostPaths are the host paths the user lets tasks bind
	// (--allow-host-path); the zero value allows none.
	HostPaths HostPaths
	// Services is what becomes of the processes the agents leave running;
	// the zero value is ServicesAuto.
	Services ServicesPolicy
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
	// JobUUID is Harbor's id of the trial's job (config.json's job_id); ""
	// for a trial outside a job.
	JobUUID string
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
	CostUSD modelcall.USD   `json:"cost_usd"`
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
	res   *trialdir.TrialResult
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
	container         runtime.Container // nil until created
	img               runtime.Image
	workdir           string
	binds             []HostBind // the task's host paths, as allowed
	tun               *tunnel.Tunnel
	tunClosed         bool
	deadline          time.Time
	// egress is the allowlist proxy, when a phase has one.
	egress *egress.Proxy
	// agentGiven and verifierGiven are what each phase is given
	// (planNetwork); the result records them.
	agentGiven, verifierGiven task.Network
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
	// steps is a multi-step trial's progress (steps.go); nil otherwise.
	steps *stepsRun
	// baseline is the container's processes before the agents started,
	// which the sweep spares when uids cannot tell (processes.go).
	baseline *inside.Baseline
}

// Run runs one trial, step by step (docs/run.md), and writes its folder:
// result.json last, atomically. It returns an error only when the result
// could not be written; everything else is in the result.
func Run(ctx context.Context, env *Env, spec Spec, emit func(Event)) (*trialdir.TrialResult, error) {
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
	logFile, err := r.openSink(trialdir.Log, env.bounds().TrialLog)
	if err != nil {
		return nil, fmt.Errorf("trial %s: %w", spec.Name, err)
	}
	r.logFile = logFile
	r.log = slog.New(slog.NewTextHandler(logFile, nil)).With("trial", r.id)
	r.res.Timeouts = r.timeouts()
	r.emit(Event{Time: r.start, Type: EventStarted, Trial: spec.Name})
	r.log.Info("trial start", "task", spec.Task.Name, "condition", m.Condition, "attempt", spec.Attempt, "manifest_sha256", m.Hash())
	if err := atomicfile.WriteJSON(filepath.Join(spec.Dir, trialdir.Config), r.config()); err != nil {
		r.cleanupError("write "+trialdir.Config, err)
	}

	reason := r.execute(ctx)
	r.finish(ctx, reason)
	r.scrubResult()

	// Exception messages quote agents and verifiers: the result is
	// scrubbed like their files.
	var data bytes.Buffer
	err = trialdir.WriteResult(&data, r.res)
	if err == nil {
		err = atomicfile.Write(filepath.Join(spec.Dir, trialdir.Result), r.secrets.Scrub(data.Bytes()))
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
	if t := r.taskAgentTimeout(); t > 0 && t < d {
		d = t
	}
	return r.env.Limits.scale(d)
}

// config is the trial's config.json: what it was asked to run, Harbor's
// TrialConfig with troupe's fields beside it. No secret.
func (r *run) config() *trialdir.TrialStart {
	res := r.res
	return &trialdir.TrialStart{
		TrialConfig: res.Config, TrialID: r.id, JobID: r.env.JobID,
		TaskName: res.TaskName, TaskPath: res.TaskPath, TaskChecksum: res.TaskChecksum, Dataset: res.Dataset,
		Attempt: res.Attempt, Condition: res.Condition, ManifestPath: res.ManifestPath, ManifestHash: res.ManifestHash,
		AgentUser: res.AgentUser, Timeouts: res.Timeouts, Version: r.env.Version,
	}
}

// phase starts a phase: it stamps the result and tells the job.
func (r *run) phase(name string, t *trialdir.Timing) {
	now := time.Now()
	t.StartedAt = &now
	r.log.Info("phase", "phase", name)
	r.emit(Event{Time: now, Type: EventPhase, Trial: r.spec.Name, Phase: name})
}

func endPhase(t *trialdir.Timing) {
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
	broken := func(kind ErrorKind, err error) Reason { return r.broken(ctx, kind, err) }
	r.phase("environment_setup", &r.res.EnvironmentSetup)
	r.planNetwork()
	provision := r.provision
	if r.spec.Oracle {
		provision = r.provisionOracle
	}
	if err := provision(); err != nil {
		return broken(ErrProvision, err)
	}
	if err := r.startEgress(ctx); err != nil {
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
	if err := r.takeBaseline(ctx); err != nil {
		return broken(ErrContainer, err)
	}
	endPhase(&r.res.EnvironmentSetup)
	if len(r.spec.Task.Steps) > 0 {
		return r.runSteps(ctx) // steps.go
	}

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
	reason := r.watch(ctx, r.spec.Task.Instruction)
	endPhase(&r.res.AgentExecution)
	return reason
}

// broken records what ended the agents' phase early, and returns the
// reason: cancelled when the job was interrupted, else infra_error.
func (r *run) broken(ctx context.Context, kind ErrorKind, err error) Reason {
	if ctx.Err() != nil {
		r.fail(ErrCancelled, context.Cause(ctx))
		return Cancelled
	}
	r.fail(kind, err)
	return InfraError
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
