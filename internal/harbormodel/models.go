package harbormodel

import (
	"encoding/json"
	"slices"
	"strings"
)

// Enums of Harbor's.
var (
	// EnvironmentTypes is EnvironmentType (src/harbor/models/environment_type.py);
	// 0.3.0 has docker, daytona, e2b, modal, runloop, gke, apple-container
	// and singularity.
	EnvironmentTypes = []string{"docker", "daytona", "e2b", "modal", "runloop", "langsmith", "gke", "novita", "apple-container",
		"singularity", "islo", "tensorlake", "cwsandbox", "wandb", "use-computer"}
	// ResourceModes is ResourceMode (src/harbor/models/trial/config.py).
	ResourceModes = []string{"auto", "limit", "request", "guarantee", "ignore"}
	// MetricTypes is MetricType (src/harbor/models/metric/type.py).
	MetricTypes = []string{"sum", "min", "max", "mean", "uv-script"}
)

// taskConfig is TaskConfig (src/harbor/models/trial/config.py): a local
// task (path), a git task (git_url, git_commit_id and the path in the
// repository) or a package task (name, ref).
var taskConfig = []Field{
	{Path: "path", Kinds: String | Null},
	{Path: "git_url", Kinds: String | Null},
	{Path: "git_commit_id", Kinds: String | Null},
	{Path: "name", Kinds: String | Null},
	{Path: "ref", Kinds: String | Null},
	{Path: "overwrite", Kinds: Bool},
	{Path: "download_dir", Kinds: String | Null},
	{Path: "source", Kinds: String | Null},
}

// taskSource is TaskConfig.validate_task_source, in 0.3.0 as in 0.13.1.
var taskSource = Rule{Check: func(obj map[string]any) string {
	path, name := set(obj, "path"), set(obj, "name")
	switch {
	case !path && !name:
		return "Either 'path' or 'name' must be set."
	case path && name:
		return "Cannot set both 'path' and 'name'."
	case set(obj, "ref") && !name:
		return "'ref' requires 'name' to be set."
	case set(obj, "git_commit_id") && !set(obj, "git_url"):
		return "'git_commit_id' requires 'git_url' to be set."
	}
	return ""
}}

// agentConfig is AgentConfig (src/harbor/models/trial/config.py).
var agentConfig = []Field{
	{Path: "name", Kinds: String | Null},
	{Path: "import_path", Kinds: String | Null},
	{Path: "model_name", Kinds: String | Null},
	{Path: "skills", Kinds: Array},
	{Path: "override_timeout_sec", Kinds: Number | Null},
	{Path: "override_setup_timeout_sec", Kinds: Number | Null},
	{Path: "max_timeout_sec", Kinds: Number | Null},
	{Path: "extra_allowed_hosts", Kinds: Array},
	{Path: "kwargs", Kinds: Object},
	{Path: "env", Kinds: Object},
	{Path: "env.*", Kinds: String},
	{Path: "mcp_servers", Kinds: Array},
}

// environmentConfig is EnvironmentConfig (src/harbor/models/trial/config.py).
var environmentConfig = []Field{
	{Path: "type", Kinds: String | Null, Enum: EnvironmentTypes},
	{Path: "import_path", Kinds: String | Null},
	{Path: "force_build", Kinds: Bool},
	{Path: "delete", Kinds: Bool},
	{Path: "cpu_enforcement_policy", Kinds: String, Enum: ResourceModes},
	{Path: "memory_enforcement_policy", Kinds: String, Enum: ResourceModes},
	{Path: "override_cpus", Kinds: Int | Null},
	{Path: "override_memory_mb", Kinds: Int | Null},
	{Path: "override_storage_mb", Kinds: Int | Null},
	{Path: "override_gpus", Kinds: Int | Null},
	{Path: "override_tpu", Kinds: Object | Null},
	{Path: "mounts", Kinds: Array | Null},
	{Path: "extra_docker_compose", Kinds: Array},
	{Path: "env", Kinds: Object},
	{Path: "env.*", Kinds: String},
	{Path: "kwargs", Kinds: Object},
	{Path: "extra_allowed_hosts", Kinds: Array},
}

// verifierConfig is VerifierConfig (src/harbor/models/trial/config.py).
var verifierConfig = []Field{
	{Path: "override_timeout_sec", Kinds: Number | Null},
	{Path: "max_timeout_sec", Kinds: Number | Null},
	{Path: "env", Kinds: Object},
	{Path: "env.*", Kinds: String},
	{Path: "import_path", Kinds: String | Null},
	{Path: "kwargs", Kinds: Object},
	{Path: "disable", Kinds: Bool},
}

// timeoutMultipliers are the multipliers TrialConfig and JobConfig share.
var timeoutMultipliers = []Field{
	{Path: "timeout_multiplier", Kinds: Number},
	{Path: "agent_timeout_multiplier", Kinds: Number | Null},
	{Path: "verifier_timeout_multiplier", Kinds: Number | Null},
	{Path: "agent_setup_timeout_multiplier", Kinds: Number | Null},
	{Path: "environment_build_timeout_multiplier", Kinds: Number | Null},
}

// trialConfig is TrialConfig (src/harbor/models/trial/config.py): task
// required, the rest defaulted.
var trialConfig = slices.Concat(
	[]Field{
		{Path: "task", Kinds: Object, Required: true},
		{Path: "trial_name", Kinds: String},
		{Path: "trials_dir", Kinds: String},
		{Path: "agent", Kinds: Object},
		{Path: "environment", Kinds: Object},
		{Path: "verifier", Kinds: Object},
		{Path: "artifacts", Kinds: Array},
		{Path: "extra_instruction_paths", Kinds: Array}, // not in 0.3.0
		{Path: "job_id", Kinds: String | Null, Format: UUID},
	},
	timeoutMultipliers,
	under("task", taskConfig),
	under("agent", agentConfig),
	under("environment", environmentConfig),
	under("verifier", verifierConfig),
)

// TrialConfig is a trial folder's config.json: Harbor's trial writes its
// TrialConfig there, and harbor jobs resume reads it back
// (TrialConfig.model_validate_json in src/harbor/job.py).
var TrialConfig = &Model{
	Name:   "TrialConfig",
	Fields: trialConfig,
	Rules:  rulesUnder("task", []Rule{taskSource}),
}

// TrialResult is a trial folder's result.json: TrialResult, TimingInfo,
// ExceptionInfo, AgentInfo and ModelInfo in src/harbor/models/trial/result.py;
// its config a TrialConfig; LocalTaskId, GitTaskId and PackageTaskId in
// src/harbor/models/task/id.py; AgentContext in
// src/harbor/models/agent/context.py; VerifierResult in
// src/harbor/models/verifier/result.py.
var TrialResult = &Model{
	Name: "TrialResult",
	Fields: slices.Concat([]Field{
		{Path: "id", Kinds: String, Required: true, Format: UUID}, // Harbor: UUID = uuid4(); troupe: always written
		{Path: "task_name", Kinds: String, Required: true},
		{Path: "trial_name", Kinds: String, Required: true},
		{Path: "trial_uri", Kinds: String, Required: true, Format: FileURI},
		{Path: "task_id", Kinds: Object, Required: true}, // LocalTaskId | GitTaskId | PackageTaskId
		{Path: "task_id.path", Kinds: String},            // LocalTaskId, GitTaskId: required
		{Path: "task_id.git_url", Kinds: String},         // GitTaskId: required
		{Path: "task_id.git_commit_id", Kinds: String | Null},
		{Path: "task_id.org", Kinds: String}, // PackageTaskId: required, with name
		{Path: "task_id.name", Kinds: String},
		{Path: "task_id.ref", Kinds: String | Null},
		{Path: "source", Kinds: String | Null},                 // str | None = None
		{Path: "task_checksum", Kinds: String, Required: true}, // str
		{Path: "config", Kinds: Object, Required: true},        // TrialConfig
		{Path: "agent_info", Kinds: Object, Required: true},    // AgentInfo
		{Path: "agent_result", Kinds: Object | Null},           // AgentContext | None
		{Path: "verifier_result", Kinds: Object | Null},        // VerifierResult | None
		{Path: "exception_info", Kinds: Object | Null},         // ExceptionInfo | None
		{Path: "started_at", Kinds: String | Null, Format: DateTime},
		{Path: "finished_at", Kinds: String | Null, Format: DateTime},
		{Path: "environment_setup", Kinds: Object | Null}, // TimingInfo | None
		{Path: "agent_setup", Kinds: Object | Null},
		{Path: "agent_execution", Kinds: Object | Null},
		{Path: "verifier", Kinds: Object | Null},
		{Path: "step_results", Kinds: Array | Null}, // list[StepResult] | None; not in 0.3.0

		// TimingInfo.
		{Path: "environment_setup.started_at", Kinds: String | Null, Format: DateTime},
		{Path: "environment_setup.finished_at", Kinds: String | Null, Format: DateTime},
		{Path: "agent_setup.started_at", Kinds: String | Null, Format: DateTime},
		{Path: "agent_setup.finished_at", Kinds: String | Null, Format: DateTime},
		{Path: "agent_execution.started_at", Kinds: String | Null, Format: DateTime},
		{Path: "agent_execution.finished_at", Kinds: String | Null, Format: DateTime},
		{Path: "verifier.started_at", Kinds: String | Null, Format: DateTime},
		{Path: "verifier.finished_at", Kinds: String | Null, Format: DateTime},

		// AgentInfo, ModelInfo.
		{Path: "agent_info.name", Kinds: String, Required: true},
		{Path: "agent_info.version", Kinds: String, Required: true},
		{Path: "agent_info.model_info", Kinds: Object | Null},
		{Path: "agent_info.model_info.name", Kinds: String, Required: true},
		// str | None since 0.5.0 (April 2026), str before; troupe: always a str.
		{Path: "agent_info.model_info.provider", Kinds: String, Required: true},

		// AgentContext: every field int/float/list/dict | None = None.
		{Path: "agent_result.n_input_tokens", Kinds: Int | Null},
		{Path: "agent_result.n_cache_tokens", Kinds: Int | Null},
		{Path: "agent_result.n_output_tokens", Kinds: Int | Null},
		{Path: "agent_result.cost_usd", Kinds: Number | Null},
		{Path: "agent_result.rollout_details", Kinds: Array | Null},
		{Path: "agent_result.metadata", Kinds: Object | Null},

		// VerifierResult: rewards: dict[str, float | int] | None = None.
		{Path: "verifier_result.rewards", Kinds: Object | Null},
		{Path: "verifier_result.rewards.*", Kinds: Number},

		// ExceptionInfo: every field required.
		{Path: "exception_info.exception_type", Kinds: String, Required: true},
		{Path: "exception_info.exception_message", Kinds: String, Required: true},
		{Path: "exception_info.exception_traceback", Kinds: String, Required: true},
		{Path: "exception_info.occurred_at", Kinds: String, Required: true, Format: DateTime},
	}, under("config", trialConfig)),
	Rules: []Rule{
		{Path: "task_id", Check: taskID},
		rulesUnder("config.task", []Rule{taskSource})[0],
	},
}

// taskID is the union LocalTaskId | GitTaskId | PackageTaskId: a path
// (and a git_url for a GitTaskId), or an org and a name.
func taskID(obj map[string]any) string {
	if set(obj, "path") || (set(obj, "org") && set(obj, "name")) {
		return ""
	}
	return "none of LocalTaskId (path), GitTaskId (git_url, path), PackageTaskId (org, name)"
}

// datasetConfig is DatasetConfig (src/harbor/models/job/config.py): a local
// dataset folder (path) or a registry's dataset (name, version).
var datasetConfig = []Field{
	{Path: "path", Kinds: String | Null},
	{Path: "name", Kinds: String | Null},
	{Path: "version", Kinds: String | Null},
	{Path: "ref", Kinds: String | Null},
	{Path: "registry_url", Kinds: String | Null},  // 0.3.0: the same, or a nested "registry", migrated
	{Path: "registry_path", Kinds: String | Null}, //
	{Path: "overwrite", Kinds: Bool},
	{Path: "download_dir", Kinds: String | Null},
	{Path: "task_names", Kinds: Array | Null},
	{Path: "task_names.[]", Kinds: String},
	{Path: "exclude_task_names", Kinds: Array | Null},
	{Path: "exclude_task_names.[]", Kinds: String},
	{Path: "n_tasks", Kinds: Int | Null},
}

// datasetSource is DatasetConfig.validate_dataset_source.
var datasetSource = Rule{Check: func(obj map[string]any) string {
	path, name := set(obj, "path"), set(obj, "name")
	switch {
	case !path && !name:
		return "Either 'path' or 'name' must be set."
	case path && name:
		return "Cannot set both 'path' and 'name'."
	case set(obj, "version") && set(obj, "ref"):
		return "Cannot set both 'version' and 'ref'."
	}
	return ""
}}

// JobConfig is a job folder's config.json: JobConfig, RetryConfig,
// DatasetConfig and PluginConfig in src/harbor/models/job/config.py;
// MetricConfig in src/harbor/models/metric/config.py; its agents,
// environment, verifier and tasks TrialConfig's parts. harbor view and
// harbor jobs resume read it (JobScanner.get_job_config in
// src/harbor/viewer/scanner.py; resume in src/harbor/cli/jobs.py). Every
// field has a default.
var JobConfig = &Model{
	Name: "JobConfig",
	Fields: slices.Concat([]Field{
		{Path: "job_name", Kinds: String},
		{Path: "jobs_dir", Kinds: String},
		{Path: "n_attempts", Kinds: Int},
		{Path: "debug", Kinds: Bool},
		{Path: "n_concurrent_trials", Kinds: Int},
		{Path: "quiet", Kinds: Bool},
		{Path: "retry", Kinds: Object},
		{Path: "retry.max_retries", Kinds: Int}, // ge=0: a rule
		{Path: "retry.include_exceptions", Kinds: Array | Null},
		{Path: "retry.exclude_exceptions", Kinds: Array | Null},
		{Path: "retry.wait_multiplier", Kinds: Number},
		{Path: "retry.min_wait_sec", Kinds: Number},
		{Path: "retry.max_wait_sec", Kinds: Number},
		{Path: "environment", Kinds: Object},
		{Path: "verifier", Kinds: Object},
		{Path: "metrics", Kinds: Array},
		{Path: "metrics.[]", Kinds: Object},
		{Path: "metrics.[].type", Kinds: String, Enum: MetricTypes},
		{Path: "metrics.[].kwargs", Kinds: Object},
		{Path: "agents", Kinds: Array},
		{Path: "agents.[]", Kinds: Object},
		{Path: "datasets", Kinds: Array},
		{Path: "datasets.[]", Kinds: Object},
		{Path: "tasks", Kinds: Array},
		{Path: "tasks.[]", Kinds: Object},
		{Path: "artifacts", Kinds: Array},
		{Path: "extra_instruction_paths", Kinds: Array}, // not in 0.3.0
		{Path: "plugins", Kinds: Array},                 // not in 0.3.0
		{Path: "plugins.[]", Kinds: Object},
		{Path: "plugins.[].import_path", Kinds: String, Required: true},
		{Path: "plugins.[].kwargs", Kinds: Object},
	},
		timeoutMultipliers,
		under("environment", environmentConfig),
		under("verifier", verifierConfig),
		under("agents.[]", agentConfig),
		under("datasets.[]", datasetConfig),
		under("tasks.[]", taskConfig),
	),
	Rules: slices.Concat(
		[]Rule{{Path: "retry", Check: func(obj map[string]any) string {
			if n, ok := obj["max_retries"].(json.Number); ok && strings.HasPrefix(n.String(), "-") {
				return "max_retries must be greater than or equal to 0"
			}
			return ""
		}}},
		rulesUnder("datasets.[]", []Rule{datasetSource}),
		rulesUnder("tasks.[]", []Rule{taskSource}),
	),
}

// JobResult is a job folder's result.json: JobResult, JobStats and
// AgentDatasetStats in src/harbor/models/job/result.py. harbor view and
// harbor jobs resume read it (JobScanner.get_job_result; Job.__init__ in
// src/harbor/job.py, which keeps its id). 0.3.0's JobStats counts
// n_trials and n_errors instead, with defaults, and has no updated_at.
var JobResult = &Model{
	Name: "JobResult",
	Fields: []Field{
		{Path: "id", Kinds: String, Required: true, Format: UUID},
		{Path: "started_at", Kinds: String, Required: true, Format: DateTime},
		{Path: "updated_at", Kinds: String | Null, Format: DateTime},
		{Path: "finished_at", Kinds: String | Null, Format: DateTime},
		{Path: "n_total_trials", Kinds: Int, Required: true},
		{Path: "stats", Kinds: Object, Required: true},
		{Path: "trial_results", Kinds: Array},

		{Path: "stats.n_completed_trials", Kinds: Int},
		{Path: "stats.n_errored_trials", Kinds: Int},
		{Path: "stats.n_running_trials", Kinds: Int},
		{Path: "stats.n_pending_trials", Kinds: Int},
		{Path: "stats.n_cancelled_trials", Kinds: Int},
		{Path: "stats.n_retries", Kinds: Int},
		{Path: "stats.n_input_tokens", Kinds: Int | Null},
		{Path: "stats.n_cache_tokens", Kinds: Int | Null},
		{Path: "stats.n_output_tokens", Kinds: Int | Null},
		{Path: "stats.cost_usd", Kinds: Number | Null},
		{Path: "stats.evals", Kinds: Object},
		{Path: "stats.evals.*", Kinds: Object},
		{Path: "stats.evals.*.n_trials", Kinds: Int},
		{Path: "stats.evals.*.n_errors", Kinds: Int},
		{Path: "stats.evals.*.metrics", Kinds: Array},
		{Path: "stats.evals.*.metrics.[]", Kinds: Object},
		{Path: "stats.evals.*.pass_at_k", Kinds: Object},
		{Path: "stats.evals.*.pass_at_k.*", Kinds: Number},
		{Path: "stats.evals.*.reward_stats", Kinds: Object},
		{Path: "stats.evals.*.reward_stats.*", Kinds: Object},
		{Path: "stats.evals.*.reward_stats.*.*", Kinds: Array},
		{Path: "stats.evals.*.reward_stats.*.*.[]", Kinds: String},
		{Path: "stats.evals.*.exception_stats", Kinds: Object},
		{Path: "stats.evals.*.exception_stats.*", Kinds: Array},
		{Path: "stats.evals.*.exception_stats.*.[]", Kinds: String},
	},
}
