package report

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/troupebench/troupe/trialdir"
)

// Trial is a trial as a comparison sees it: its result.json, as the
// format's one reader (trialdir.DecodeResult) reads it, with where it was
// found. The fields a comparison reads are checked for figures no trial
// can have (decodeTrial); the rest are the viewer's.
type Trial struct {
	// Dir is the trial folder; Job the job folder holding it.
	Dir, Job string
	// Redone marks a run the job redid (.superseded/): it counts for what
	// it cost, nothing else.
	Redone bool
	trialdir.TrialResult
}

// Wall is the trial's time from start to finish.
func (t *Trial) Wall() time.Duration { return t.FinishedAt.Sub(t.StartedAt) }

// UnreadableError is a result.json that could not be read as a trial: bad
// JSON, figures no trial can have, too big to be troupe's. Load skips it
// and returns it among its errors, so that a comparison of the rest can
// still name it (see Skipped): a result left out silently would change the
// figures with nobody knowing.
type UnreadableError struct {
	Path string
	Err  error
}

func (e *UnreadableError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *UnreadableError) Unwrap() error { return e.Err }

// Unreadable is a skipped result as reports name it.
type Unreadable struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Skipped lists the unreadable results among the errors Load (or a scan of
// the viewer) returned, in the order found; other errors (a missing folder)
// are not results and are left to the caller.
func Skipped(err error) []Unreadable {
	var out []Unreadable
	var walk func(error)
	walk = func(err error) {
		// A joined error is opened here: errors.AsType would stop at
		// the first unreadable result of the join.
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if u, ok := errors.AsType[*UnreadableError](err); ok {
			out = append(out, Unreadable{Path: u.Path, Reason: u.Err.Error()})
		}
	}
	walk(err)
	return out
}

// Load reads every trial result under the given folders: job folders (with
// their trial folders), trial folders, or folders of jobs. Runs that a job
// redid (.superseded/) are returned marked Redone, for their cost only;
// anything inside a trial folder is left out (what a task's verifier left in /logs cannot pose as a trial). A
// result.json that is not a trial's is skipped; one that cannot be read is
// an *UnreadableError naming it, joined with the others, and the trials
// that could be read are returned beside the error.
func Load(dirs ...string) ([]*Trial, error) {
	var trials []*Trial
	var errs []error
	seen := map[string]bool{}
	for _, dir := range dirs {
		found := 0
		err := walkFolders(dir, func(p string) bool {
			abs, _ := filepath.Abs(p)
			if seen[abs] {
				return true
			}
			seen[abs] = true
			t, err := readTrial(filepath.Join(p, trialdir.Result))
			if err != nil {
				errs = append(errs, err)
				return false
			}
			if t != nil {
				found++
				trials = append(trials, t)
			} else {
				trials = append(trials, redoneRuns(p)...)
			}
			return t != nil
		})
		if err != nil {
			errs = append(errs, err)
		} else if found == 0 {
			errs = append(errs, fmt.Errorf("%s holds no trial results (result.json with a trial_name and an outcome)", dir))
		}
	}
	sortTrials(trials)
	return trials, errors.Join(errs...)
}

// redoneRuns reads the runs a job folder's job redid after an
// infrastructure failure or an interruption (.superseded/<trial>.<why>.<time>):
// they were paid for, and count for their cost. A run superseded because
// its inputs changed is another roster's, and one whose result cannot be
// read is history: both are left out.
func redoneRuns(jobDir string) []*Trial {
	entries, err := os.ReadDir(filepath.Join(jobDir, trialdir.Superseded))
	if err != nil {
		return nil
	}
	var out []*Trial
	for _, e := range entries {
		if !e.IsDir() || strings.Contains(e.Name(), ".other-inputs.") {
			continue
		}
		t, err := readTrial(filepath.Join(jobDir, trialdir.Superseded, e.Name(), trialdir.Result))
		if err != nil || t == nil || t.Outcome.Scored() {
			continue
		}
		t.Redone = true
		out = append(out, t)
	}
	return out
}

func sortTrials(trials []*Trial) {
	slices.SortFunc(trials, func(a, b *Trial) int {
		return cmp.Or(strings.Compare(a.TaskName, b.TaskName), strings.Compare(a.Condition, b.Condition), cmp.Compare(a.Attempt, b.Attempt), strings.Compare(a.Dir, b.Dir))
	})
}

// walkFolders calls visit for dir and every folder below it that may hold
// results, in lexical order; visit returns true for a trial folder, which
// is not descended into. A trial's own subfolders and superseded runs are
// never visited.
func walkFolders(dir string, visit func(dir string) (trial bool)) error {
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a folder: give job folders (troupe run's --out)", dir)
	}
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			return nil
		}
		if p != dir && e.Name() == trialdir.Superseded {
			return fs.SkipDir
		}
		if visit(p) {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	return nil
}

// readRegular reads a regular file. There is none (nil data, no error) when
// it is absent, a link (it could point anywhere) or a FIFO (it would block);
// one over 16 MiB is no result or config troupe wrote, and an error.
func readRegular(path string) ([]byte, os.FileInfo, error) {
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() {
		return nil, nil, nil
	}
	if info.Size() > 16<<20 {
		return nil, nil, fmt.Errorf("%d bytes: too big to be troupe's", info.Size())
	}
	data, err := os.ReadFile(path)
	return data, info, err
}

// readTrial reads one result.json; nil when it is not a trial's (a job's).
// A result that cannot be read is an *UnreadableError.
func readTrial(path string) (*Trial, error) {
	t, err := decodeTrial(path)
	if err != nil {
		return nil, &UnreadableError{Path: path, Err: err}
	}
	return t, nil
}

func decodeTrial(path string) (*Trial, error) {
	data, _, err := readRegular(path)
	if data == nil || err != nil {
		return nil, err
	}
	res, err := trialdir.DecodeResult(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	t := Trial{TrialResult: *res}
	if t.TrialName == "" || t.Outcome == "" {
		return nil, nil
	}
	if t.Condition == "" || t.TaskName == "" {
		return nil, errors.New("a trial result without a condition or a task")
	}
	if !t.Outcome.Valid() {
		// Counted by no tally, it would be a trial in no column.
		return nil, fmt.Errorf("outcome %q is none of troupe's", t.Outcome)
	}
	// Figures no trial can have would only poison the sums.
	plausible := func(v float64) bool { return v >= 0 && v <= 1e9 }
	ok := plausible(float64(t.AgentResult.CostUSD)) && (t.Reward == nil || !math.IsNaN(*t.Reward) && math.Abs(*t.Reward) <= 1e9)
	for _, a := range t.Agents {
		ok = ok && plausible(float64(a.Usage.CostUSD)) && a.Usage.Calls >= 0 && a.Usage.InputTokens >= 0 && a.Usage.OutputTokens >= 0 && a.Usage.CachedTokens >= 0
	}
	if !ok || t.AgentResult.NInputTokens < 0 || t.AgentResult.NOutputTokens < 0 {
		return nil, errors.New("implausible figures (a negative count, or a cost or reward out of range)")
	}
	t.Dir = filepath.Dir(path)
	t.Job = filepath.Dir(t.Dir)
	return &t, nil
}
