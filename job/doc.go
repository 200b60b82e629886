// Package job runs `troupe run`'s jobs: every condition (a manifest's
// roster, or the oracle) on every task, so many attempts each, as trials
// (package trial) at most Spec.Concurrency at once, in a folder that the
// same command resumes.
//
// A job is planned before anything runs: NewPlan expands conditions ×
// tasks × attempts into trials, attempts outermost and conditions
// innermost, checks every name and every stack, and says which stacks
// and images the trials use; Plan.Resume reads an existing job folder for
// the trials it keeps and those it redoes, and why. The plan is plain
// data: `troupe run --dry-run` prints it, and Plan.Run walks it.
//
// Running, the job pins its inputs in lock.json (a changed manifest,
// task or stack is refused once results of it exist), holds its folder
// against a second run, writes config.json and keeps result.json (Result)
// up to date as trials finish. One scheduling loop launches the trials:
// a fixed job is one round of every trial to run; a sequential job
// (Sequential, `--until-decided`) runs attempt r of the conditions its
// tests still need as round r, and looks at each round it completed. A
// trial the harness failed (unscored_infra) is run again, Spec.Retries
// times, after a backoff; every earlier run is kept in .superseded/.
//
// Imports point one way: cmd/troupe → job → trial.
package job
