package job

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trialdir"
)

// config is the job's config.json: what it was asked to run, as Harbor's
// JobConfig (src/harbor/models/job/config.py), which harbor view lists a
// job by and harbor jobs resume reads back, with troupe's own fields
// beside it (Harbor ignores those). docs/run.md says what goes where.
type config struct {
	// JobName and JobsDir are the job folder: Harbor's job folder is
	// jobs_dir/job_name, and its trials' trials_dir.
	JobName           string  `json:"job_name"`
	JobsDir           string  `json:"jobs_dir"`
	NAttempts         int     `json:"n_attempts"`
	TimeoutMultiplier float64 `json:"timeout_multiplier"`
	NConcurrentTrials int     `json:"n_concurrent_trials"`
	Retry             retry   `json:"retry"`
	// Environment is the conditions' environment when they all have the
	// same; else Docker alone, each trial's config.json holding its own.
	Environment trialdir.EnvironmentConfig `json:"environment"`
	// Agents are the conditions, one each, as their trials' config.json
	// names them.
	Agents []trialdir.AgentConfig `json:"agents"`
	// Datasets are the registry datasets --dataset named; Tasks the task
	// folders --tasks named.
	Datasets []trialdir.DatasetConfig `json:"datasets"`
	Tasks    []trialdir.TaskConfig    `json:"tasks"`

	JobID     string   `json:"troupe_job_id"`
	Command   []string `json:"command"`
	Manifests []string `json:"manifests"`
	// TaskPaths are the folders of every task, a dataset's among them.
	TaskPaths []string `json:"task_paths"`
	Version   string   `json:"troupe_version"`
}

// retry is Harbor's RetryConfig: troupe retries unscored_infra trials
// only, as many times as --retries says.
type retry struct {
	MaxRetries int `json:"max_retries"`
}

// config is the job's config.json.
func (r *runner) config() *config {
	spec := r.plan.spec
	dir := absDir(r.plan.Dir)
	c := &config{
		JobName: filepath.Base(dir), JobsDir: filepath.Dir(dir),
		NAttempts: r.plan.Attempts, TimeoutMultiplier: r.env.Limits.TimeoutMultiplier(),
		NConcurrentTrials: r.plan.Concurrency, Retry: retry{MaxRetries: r.plan.Retries},
		Environment: trialdir.EnvironmentConfig{Type: "docker", Delete: true},
		Agents:      []trialdir.AgentConfig{}, Datasets: []trialdir.DatasetConfig{}, Tasks: []trialdir.TaskConfig{},
		JobID: r.env.JobID, Command: spec.Command, Version: r.env.Version,
	}
	var envs []trialdir.EnvironmentConfig
	for _, cond := range spec.Conditions {
		c.Manifests = append(c.Manifests, cond.Path)
		c.Agents = append(c.Agents, trial.HarborAgent(cond.Team))
		envs = append(envs, trial.HarborEnvironment(cond.Team.Manifest))
	}
	if len(envs) > 0 && !slices.ContainsFunc(envs, func(e trialdir.EnvironmentConfig) bool { return !reflect.DeepEqual(e, envs[0]) }) {
		c.Environment = envs[0]
	}
	for _, t := range spec.Tasks {
		c.TaskPaths = append(c.TaskPaths, t.Dir)
		o := t.Origin
		if o == nil {
			_, tc, _ := trial.HarborTask(t)
			c.Tasks = append(c.Tasks, tc)
			continue
		}
		ds := trialdir.DatasetConfig{Name: o.Name, Version: o.Version}
		if strings.HasPrefix(o.Registry, "http://") || strings.HasPrefix(o.Registry, "https://") {
			ds.RegistryURL = o.Registry
		} else {
			ds.RegistryPath = strings.TrimPrefix(o.Registry, "file://")
		}
		if !slices.Contains(c.Datasets, ds) {
			c.Datasets = append(c.Datasets, ds)
		}
	}
	return c
}

// absDir is dir made absolute; as given if the working folder is gone.
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}
