// Package trial runs one benchmark trial of an agent team: `troupe run`'s
// unit, which package job schedules.
//
// A trial (Run) is one team on one task: it provisions the agents' keys,
// prompts, channel and gateway tokens; starts a container with no network;
// opens the tunnel through which the agents reach the relay and the
// gateway; launches one `troupe agent` per roster member; waits for them to
// be ready; posts the task; watches for the orchestrator's DONE:, the
// deadline, a spent budget or the agents' end; sweeps; runs the task's
// verifier; and writes the trial folder, result.json last.
//
// Tasks are in Harbor's format (package task). docs/run.md describes the steps,
// the completion reasons and outcomes, and the files on disk.
package trial
