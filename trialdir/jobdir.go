package trialdir

import "fmt"

// Files of a job folder, relative to it: the job's own files beside its
// trial folders (TrialName). The job (package job) writes them; troupe
// compare, view and replay find a job and its trials by them.
const (
	// JobConfig is what the job was asked to run: its command line,
	// manifests, tasks and settings.
	JobConfig = "config.json"
	// JobLock pins the job's inputs by digest: a resumed job must run the
	// same manifests, tasks and stacks.
	JobLock = "lock.json"
	// JobResult is the job's totals (job.Result), rewritten as trials
	// finish.
	JobResult = "result.json"
	// JobLog is the job's own log, appended to by every run of it.
	JobLog = "job.log"
	// Superseded holds the earlier runs of trials that were redone, one
	// folder each, <trial>.<why>.<time>: nothing of a run is deleted.
	Superseded = ".superseded"
)

// TrialName is a trial's folder name in its job,
// <task>__<condition>__<attempt>: the one rule, for the job runner and the
// commands that find a trial.
func TrialName(task, condition string, attempt int) string {
	return fmt.Sprintf("%s__%s__%d", task, condition, attempt)
}
