package trial

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/troupebench/troupe/trialdir"
)

// FinishedTrials lists the trial folders in dir (a job's folder) that hold
// a finished result (Result.Finished): what a resumed job keeps, and what
// a command given a job's folder instead of a trial's can suggest.
func FinishedTrials(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if res, err := trialdir.ReadResult(filepath.Join(dir, e.Name(), trialdir.Result)); err == nil && res.Finished() {
			names = append(names, e.Name())
		}
	}
	return names
}
