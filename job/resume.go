package job

import (
	"os"
	"path/filepath"

	"github.com/troupebench/troupe/trialdir"
)

// Resume reads the job folder for what it holds of each trial: a finished
// result of the same inputs (the manifest's hash and the task's digest)
// is kept, with its outcome; a folder of an unfinished run, or a result of
// other inputs (its lock.json removed by hand), is redone, and why; the
// rest is to run. A folder that does not exist holds nothing. It only
// reads; Run moves what is redone aside.
func (p *Plan) Resume() {
	for _, t := range p.Trials {
		t.State, t.Why, t.Outcome, t.kept = ToRun, "", "", nil
		dir := filepath.Join(p.Dir, t.Name)
		res, readErr := trialdir.ReadResult(filepath.Join(dir, trialdir.Result))
		finished := readErr == nil && res.Finished()
		// A result of other inputs is not kept: it would be counted as a
		// result of these.
		if finished && res.ManifestHash == t.cond.Team.Manifest.Hash() && res.TaskChecksum == t.task.Digest {
			t.State, t.Outcome, t.kept = Kept, res.Outcome, res
			continue
		}
		if _, err := os.Stat(dir); err == nil {
			t.State, t.Why = Redo, "unfinished"
			if finished {
				t.Why = "other-inputs"
			}
		}
	}
}

// Kept counts the trials the job keeps from an earlier run.
func (p *Plan) Kept() int {
	n := 0
	for _, t := range p.Trials {
		if t.State == Kept {
			n++
		}
	}
	return n
}
