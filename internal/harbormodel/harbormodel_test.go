package harbormodel

import (
	"slices"
	"strings"
	"testing"
)

// TestModels: each model passes a document Harbor reads and fails, with a
// located problem, what Harbor's model refuses.
func TestModels(t *testing.T) {
	const jobID = "0f8fad5b-d9cb-469f-a165-70867728950e"
	cases := []struct {
		name  string
		model *Model
		doc   string
		// want is in the problem reported; "" when there is none.
		want string
	}{
		{"job config, the defaults", JobConfig, `{}`, ""},
		{"job config, troupe's", JobConfig, `{"job_name":"j","jobs_dir":"/jobs","n_attempts":2,"timeout_multiplier":1,"n_concurrent_trials":4,
			"retry":{"max_retries":2},"environment":{"type":"docker","delete":true,"override_cpus":1},
			"agents":[{"name":"team","model_name":"mock/hello","max_timeout_sec":300,"kwargs":{"condition":"team"}}],
			"datasets":[{"name":"terminal-bench","version":"2.0","registry_url":"https://example.com/registry.json"}],
			"tasks":[{"path":"/tasks/hello","source":null}],"command":["troupe","run"],"task_paths":["/tasks/hello"]}`, ""},
		{"job config, troupe's tasks of before", JobConfig, `{"tasks":["/tasks/hello"]}`, "tasks[0]: string, want object"},
		{"job config, a task named and at a path", JobConfig, `{"tasks":[{"path":"/t","name":"org/t"}]}`, "tasks[0]: Cannot set both 'path' and 'name'."},
		{"job config, a task of nothing", JobConfig, `{"tasks":[{"source":"x"}]}`, "tasks[0]: Either 'path' or 'name' must be set."},
		{"job config, a dataset of nothing", JobConfig, `{"datasets":[{"version":"2.0"}]}`, "datasets[0]: Either 'path' or 'name' must be set."},
		{"job config, a dataset's version and ref", JobConfig, `{"datasets":[{"name":"d","version":"2.0","ref":"latest"}]}`, "datasets[0]: Cannot set both 'version' and 'ref'."},
		{"job config, negative retries", JobConfig, `{"retry":{"max_retries":-1}}`, "retry: max_retries must be greater than or equal to 0"},
		{"job config, an unknown environment", JobConfig, `{"environment":{"type":"podman"}}`, `environment.type: "podman", want one of`},
		{"job config, an agent's model a number", JobConfig, `{"agents":[{"model_name":7}]}`, "agents[0].model_name: integer, want string or null"},
		{"job config, attempts a fraction", JobConfig, `{"n_attempts":1.5}`, "n_attempts: number, want integer"},
		{"job config, a plugin without its import path", JobConfig, `{"plugins":[{}]}`, "plugins[0].import_path: missing"},

		{"job result", JobResult, `{"id":"` + jobID + `","started_at":"2026-12-06T10:00:00.123456789Z","updated_at":null,"finished_at":null,
			"n_total_trials":4,"stats":{"n_completed_trials":1,"n_input_tokens":10,"cost_usd":0.5},"troupe_job_id":"job-1","trials":{"a":"passed"}}`, ""},
		{"job result, troupe's id of before", JobResult, `{"id":"job-1765000000","started_at":"2026-12-06T10:00:00Z","n_total_trials":0,"stats":{}}`, `id: "job-1765000000" is not a UUID`},
		{"job result, no id", JobResult, `{"started_at":"2026-12-06T10:00:00Z","n_total_trials":0,"stats":{}}`, "id: missing"},
		{"job result, no stats", JobResult, `{"id":"` + jobID + `","started_at":"2026-12-06T10:00:00Z","n_total_trials":0}`, "stats: missing"},
		{"job result, no start", JobResult, `{"id":"` + jobID + `","n_total_trials":0,"stats":{}}`, "started_at: missing"},
		{"job result, an eval's rewards", JobResult, `{"id":"` + jobID + `","started_at":"2026-12-06T10:00:00Z","n_total_trials":1,
			"stats":{"evals":{"team__mock__adhoc":{"n_trials":1,"reward_stats":{"reward":{"1":[7]}}}}}}`, "stats.evals.team__mock__adhoc.reward_stats.reward.1[0]: integer, want string"},

		{"trial config", TrialConfig, `{"task":{"path":"/tasks/hello"},"trial_name":"t","job_id":"` + jobID + `","troupe_job_id":"job-1"}`, ""},
		{"trial config, a git task", TrialConfig, `{"task":{"path":"tasks/hello","git_url":"https://example.com/t.git","git_commit_id":"0a1b","source":"terminal-bench"}}`, ""},
		{"trial config, troupe's task of before", TrialConfig, `{"task":{"name":"hello","path":"/tasks/hello","checksum":"sha256:0"}}`, "task: Cannot set both 'path' and 'name'."},
		{"trial config, no task", TrialConfig, `{"trial_name":"t"}`, "task: missing"},
		{"trial config, troupe's job id", TrialConfig, `{"task":{"path":"/t"},"job_id":"job-1765000000"}`, `job_id: "job-1765000000" is not a UUID`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			problems := c.model.Problems([]byte(c.doc))
			switch {
			case c.want == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case c.want != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }):
				t.Errorf("problems %q, want one saying %q", problems, c.want)
			}
		})
	}
	for _, bad := range []string{"", "[]", "{", "null"} {
		if len(JobResult.Problems([]byte(bad))) == 0 {
			t.Errorf("%q passed", bad)
		}
	}
}
