package atif

import (
	"encoding/json"

	"github.com/troupebench/troupe/modelcall"
)

// SchemaVersion is the ATIF version troupe writes.
const SchemaVersion = "ATIF-v1.7"

// Trajectory is one agent's (or the team channel's) history: Harbor's
// Trajectory model.
type Trajectory struct {
	SchemaVersion string `json:"schema_version"`
	// SessionID is the run's id, shared by every trajectory of a trial:
	// troupe's trial id.
	SessionID    string         `json:"session_id,omitempty"`
	TrajectoryID string         `json:"trajectory_id,omitempty"`
	Agent        Agent          `json:"agent"`
	Steps        []Step         `json:"steps"`
	Notes        string         `json:"notes,omitempty"`
	FinalMetrics *FinalMetrics  `json:"final_metrics,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// Agent is who acted: Harbor's Agent model. Name and Version are required.
type Agent struct {
	Name            string           `json:"name"`
	Version         string           `json:"version"`
	ModelName       string           `json:"model_name,omitempty"`
	ToolDefinitions []map[string]any `json:"tool_definitions,omitempty"`
	Extra           map[string]any   `json:"extra,omitempty"`
}

// The sources of a step.
const (
	SourceSystem = "system"
	SourceUser   = "user"
	SourceAgent  = "agent"
)

// Step is one turn: Harbor's Step model. StepID counts from 1; Message is
// required (it may be empty). ToolCalls and Metrics belong to agent steps
// only.
type Step struct {
	StepID    int    `json:"step_id"`
	Timestamp string `json:"timestamp,omitempty"`
	Source    string `json:"source"`
	ModelName string `json:"model_name,omitempty"`
	Message   string `json:"message"`
	// ToolCalls, Observation: nil when there are none.
	ToolCalls   []ToolCall   `json:"tool_calls,omitempty"`
	Observation *Observation `json:"observation,omitempty"`
	Metrics     *Metrics     `json:"metrics,omitempty"`
	// IsCopiedContext marks an agent message no recorded call produced
	// (history the agent was given).
	IsCopiedContext *bool `json:"is_copied_context,omitempty"`
	// LLMCallCount is 1 on a step made by one model call, 0 on a copied
	// one; nil on steps that are not the agent's (the team's messages).
	LLMCallCount *int           `json:"llm_call_count,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// ToolCall is one action of an agent step; Arguments is never nil.
type ToolCall struct {
	ToolCallID   string         `json:"tool_call_id"`
	FunctionName string         `json:"function_name"`
	Arguments    map[string]any `json:"arguments"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// Observation is what the environment answered a step's actions.
type Observation struct {
	Results []ObservationResult `json:"results"`
}

// ObservationResult is one result; SourceCallID, when set, names a tool
// call of the same step.
type ObservationResult struct {
	SourceCallID *string        `json:"source_call_id,omitempty"`
	Content      *string        `json:"content,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// Metrics is one model call's usage. A nil field was not known.
type Metrics struct {
	PromptTokens     *int64         `json:"prompt_tokens,omitempty"`
	CompletionTokens *int64         `json:"completion_tokens,omitempty"`
	CachedTokens     *int64         `json:"cached_tokens,omitempty"`
	CostUSD          *modelcall.USD `json:"cost_usd,omitempty"`
	Extra            map[string]any `json:"extra,omitempty"`
}

// FinalMetrics sums a trajectory.
type FinalMetrics struct {
	TotalPromptTokens     *int64         `json:"total_prompt_tokens,omitempty"`
	TotalCompletionTokens *int64         `json:"total_completion_tokens,omitempty"`
	TotalCachedTokens     *int64         `json:"total_cached_tokens,omitempty"`
	TotalCostUSD          *modelcall.USD `json:"total_cost_usd,omitempty"`
	TotalSteps            *int           `json:"total_steps,omitempty"`
	Extra                 map[string]any `json:"extra,omitempty"`
}

// Marshal encodes a trajectory as Harbor writes one: indented JSON.
func Marshal(t Trajectory) ([]byte, error) {
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

func ptr[T any](v T) *T { return &v }
