package trialdir

import (
	"path"

	"github.com/troupebench/troupe/contract"
)

// Files and folders of a trial folder, relative to it, with slashes (as
// os.Root and a job's listing take them; filepath.FromSlash for the
// host's paths). The shared ones (Result, Members, Transcript, Audit) are
// in trialdir.go. The trial writes each; report, atif, replay and the
// commands read them by these names alone.
const (
	// Config is the trial's config.json: what it was asked to run.
	Config = "config.json"
	// Log is the trial's own log.
	Log = "trial.log"
	// EntrypointLog is what the image's own first process (its
	// ENTRYPOINT) printed, its first MiB.
	EntrypointLog = "entrypoint.log"
	// Agents holds a folder per agent (Agent), and the stacks' install
	// logs (InstallLog).
	Agents = "agents"
	// Relay holds the channel's files: Members, Transcript, Audit.
	Relay = "relay"
	// Verifier holds what the verifier left in /logs/verifier, and its
	// output.
	Verifier = "verifier"
	// VerifierStdout and VerifierStderr are the output of tests/test.sh.
	VerifierStdout = "verifier/test-stdout.txt"
	VerifierStderr = "verifier/test-stderr.txt"
	// RewardText and RewardJSON are the verifier's verdict, as Harbor
	// reads it: reward.txt first, else reward.json.
	RewardText = "verifier/reward.txt"
	RewardJSON = "verifier/reward.json"
	// Artifacts holds what the task's [[artifacts]] and /logs/artifacts
	// gave, and ArtifactsManifest what was collected of them.
	Artifacts         = "artifacts"
	ArtifactsManifest = "artifacts/manifest.json"
)

// The files of an agent's folder.
const (
	systemPrompt = contract.PromptFile
	stdoutLog    = "stdout.log"
	stderrLog    = "stderr.log"
	callsLog     = "llm-calls.jsonl"
	conversation = "llm-conversation.jsonl"
)

// Agent is an agent's folder: agents/<id>.
func Agent(id string) string { return path.Join(Agents, id) }

// SystemPrompt is the system prompt the agent was given, as it read it.
func SystemPrompt(id string) string { return path.Join(Agents, id, systemPrompt) }

// Stdout and Stderr are the agent process's output.
func Stdout(id string) string { return path.Join(Agents, id, stdoutLog) }

// Stderr: see Stdout.
func Stderr(id string) string { return path.Join(Agents, id, stderrLog) }

// Calls is the agent's metering lines (modelcall's), one per model call.
func Calls(id string) string { return path.Join(Agents, id, callsLog) }

// Conversation is the agent's conversation record as the trial leaves it,
// compressed; ConversationPlain is the name it has while the gateway
// writes it, before the trial compresses it.
func Conversation(id string) string { return ConversationPlain(id) + ".gz" }

// ConversationPlain: see Conversation.
func ConversationPlain(id string) string { return path.Join(Agents, id, conversation) }

// InstallLog is the output of a stack's install script.
func InstallLog(stack string) string { return path.Join(Agents, "install-"+stack+".log") }
