package job

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/troupebench/troupe/internal/harbormodel"
	"github.com/troupebench/troupe/trialdir"
)

// checkHarborJob fails the test unless the job folder is one Harbor's
// tools read (harbor view, harbor jobs resume): config.json a JobConfig,
// result.json a JobResult, and each trial folder's config.json a
// TrialConfig and result.json a TrialResult (Harbor's models, written down
// in internal/harbormodel), every trial's job_id the job's id, and each
// trial's config one that the job's config plans, as harbor jobs resume
// matches them (Job._init_remaining_trial_configs in src/harbor/job.py):
// its agent among the job's agents, its task among the job's tasks or of
// one of its datasets, its trials_dir the job folder. It returns the
// job's id.
func checkHarborJob(t *testing.T, dir string) string {
	t.Helper()
	read := func(path string, model *harbormodel.Model, into any) {
		t.Helper()
		if err := json.Unmarshal(model.CheckFile(t, path), into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var job config
	var res Result
	read(filepath.Join(dir, trialdir.JobConfig), harbormodel.JobConfig, &job)
	read(filepath.Join(dir, trialdir.JobResult), harbormodel.JobResult, &res)
	if jobDir := filepath.Join(job.JobsDir, job.JobName); jobDir != dir {
		t.Errorf("config.json's jobs_dir/job_name %s, want %s", jobDir, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	trials := 0
	for _, e := range entries {
		if !e.IsDir() || e.Name() == trialdir.Superseded {
			continue
		}
		trials++
		var start trialdir.TrialStart
		var result trialdir.TrialResult
		read(filepath.Join(dir, e.Name(), trialdir.Config), harbormodel.TrialConfig, &start)
		read(filepath.Join(dir, e.Name(), trialdir.Result), harbormodel.TrialResult, &result)
		c := start.TrialConfig
		if c.JobID != res.ID || result.Config.JobID != res.ID {
			t.Errorf("%s: job_id %q (result.json's %q), the job's id %q", e.Name(), c.JobID, result.Config.JobID, res.ID)
		}
		if c.TrialsDir != dir || c.TimeoutMultiplier != job.TimeoutMultiplier {
			t.Errorf("%s: trials_dir %s, timeout_multiplier %v; the job's %s, %v", e.Name(), c.TrialsDir, c.TimeoutMultiplier, dir, job.TimeoutMultiplier)
		}
		if !slices.ContainsFunc(job.Agents, func(a trialdir.AgentConfig) bool { return reflect.DeepEqual(a, c.Agent) }) {
			t.Errorf("%s: agent %+v is none of the job's %+v", e.Name(), c.Agent, job.Agents)
		}
		fromDataset := start.Dataset != nil && slices.ContainsFunc(job.Datasets, func(d trialdir.DatasetConfig) bool {
			return d.Name == start.Dataset.Name && d.Version == start.Dataset.Version && c.Task.Source != nil && *c.Task.Source == d.Name
		})
		if !fromDataset && !slices.ContainsFunc(job.Tasks, func(tc trialdir.TaskConfig) bool { return reflect.DeepEqual(tc, c.Task) }) {
			t.Errorf("%s: task %+v is none of the job's tasks %+v or datasets %+v", e.Name(), c.Task, job.Tasks, job.Datasets)
		}
	}
	if trials != res.Total {
		t.Errorf("%d trial folders, n_total_trials %d", trials, res.Total)
	}
	return res.ID
}
