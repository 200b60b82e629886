package trialdir

// StepResult is one step of a multi-step trial (a task with [[steps]]):
// Harbor's StepResult (src/harbor/models/trial/result.py), whose list is
// the result's step_results, plus troupe's fields, which Harbor ignores.
// The steps that did not run (after a step below its min_reward) have
// none. Each step's verifier files are in Step(name)'s verifier/, as
// Harbor lays them out.
type StepResult struct {
	StepName string `json:"step_name"`
	// AgentResult is what the step's agents used (the trial's agent_result
	// is every step's).
	AgentResult    *AgentResult    `json:"agent_result"`
	VerifierResult *VerifierResult `json:"verifier_result"`
	// ExceptionInfo is what stopped the step: its setup.sh failed, its
	// verifier broke.
	ExceptionInfo  *ExceptionInfo `json:"exception_info"`
	AgentExecution *Timing        `json:"agent_execution"`
	Verifier       *Timing        `json:"verifier"`

	// Setup is the step's workdir/ copied in and its setup.sh run;
	// AgentSetup the team launched and ready.
	Setup      *Timing `json:"setup,omitempty"`
	AgentSetup *Timing `json:"agent_setup,omitempty"`
	// CompletionReason is why the step's agents' work ended.
	CompletionReason Reason `json:"completion_reason,omitempty"`
	// Reward is the step's score, as a trial's (its "reward", else the
	// mean of its rewards); nil without a verifier result.
	Reward *float64 `json:"reward"`
	// Done is the orchestrator's DONE: that ended the step.
	Done *Done `json:"done,omitempty"`
	// BelowMinReward says the step's rewards missed its min_reward, and
	// the steps after it did not run.
	BelowMinReward string `json:"below_min_reward,omitempty"`
}

// Steps holds a multi-step trial's folder per step (Step).
const Steps = "steps"

// Step is a step's folder, steps/<name>: its verifier/ and artifacts/,
// moved there from the trial's when the step's verifier has run.
func Step(name string) string { return Steps + "/" + name }
