package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/troupebench/troupe/internal/atomicfile"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trialdir"
)

// lockFile pins a job's inputs: a resumed job must run the same manifests
// and tasks.
type lockFile struct {
	Version string `json:"troupe_version"`
	// TimeoutMultiplier scales every limit: trials under other limits are
	// not comparable either.
	TimeoutMultiplier float64       `json:"timeout_multiplier,omitempty"`
	Conditions        []lockedInput `json:"conditions"`
	Tasks             []lockedInput `json:"tasks"`
	// Stacks are the agent programs, by the digest of their files, command
	// and environment: a result says which agent build produced it.
	Stacks []lockedInput `json:"stacks,omitempty"`
}

type lockedInput struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Digest string `json:"digest"`
}

// checkLock writes lock.json on a new job and, on a resumed one, refuses a
// manifest, task or stack that changed since, once the job holds results
// of it.
func checkLock(p *Plan, version string, multiplier float64) error {
	if multiplier <= 0 {
		multiplier = 1
	}
	lock := lockFile{Version: version, TimeoutMultiplier: multiplier}
	for _, c := range p.spec.Conditions {
		lock.Conditions = append(lock.Conditions, lockedInput{Name: c.Team.Manifest.Condition, Path: c.Path, Digest: c.Team.Manifest.Hash()})
	}
	for _, t := range p.spec.Tasks {
		lock.Tasks = append(lock.Tasks, lockedInput{Name: t.Name, Path: t.Dir, Digest: t.Digest})
	}
	usedBy := map[string][]string{} // stack → conditions
	for _, st := range p.Stacks {
		lock.Stacks = append(lock.Stacks, lockedInput{Name: st.Name, Path: st.Source, Digest: st.Digest})
		usedBy[st.Name] = st.Conditions
	}
	path := filepath.Join(p.Dir, trialdir.JobLock)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return atomicfile.WriteJSON(path, lock)
	case err != nil:
		return fmt.Errorf("lock file: %w", err)
	}
	var old lockFile
	if err := json.Unmarshal(data, &old); err != nil {
		return fmt.Errorf("%s is not a troupe lock file: %w", path, err)
	}
	// Read only when something changed: it opens every trial's result.
	trials := sync.OnceValue(func() []string { return trial.FinishedTrials(p.Dir) })
	var changed []string
	if old.TimeoutMultiplier != 0 && old.TimeoutMultiplier != multiplier && len(trials()) > 0 {
		changed = append(changed, fmt.Sprintf("--timeout-multiplier was %g when the job started, it is %g now", old.TimeoutMultiplier, multiplier))
	}
	lock.Conditions = mergeLocked("condition", old.Conditions, lock.Conditions, &changed, func(name string) bool {
		return slices.ContainsFunc(trials(), func(t string) bool { return strings.Contains(t, "__"+name+"__") })
	})
	lock.Tasks = mergeLocked("task", old.Tasks, lock.Tasks, &changed, func(name string) bool {
		return slices.ContainsFunc(trials(), func(t string) bool { return strings.HasPrefix(t, name+"__") })
	})
	lock.Stacks = mergeLocked("stack", old.Stacks, lock.Stacks, &changed, func(name string) bool {
		return slices.ContainsFunc(trials(), func(t string) bool {
			return slices.ContainsFunc(usedBy[name], func(cond string) bool { return strings.Contains(t, "__"+cond+"__") })
		})
	})
	if len(changed) > 0 {
		return fmt.Errorf("%s holds a job whose inputs changed; results would not be comparable. Use another --out, or restore the inputs:\n  %s", p.Dir, strings.Join(changed, "\n  "))
	}
	lock.Version = old.Version
	return atomicfile.WriteJSON(path, lock)
}

// mergeLocked merges the inputs locked now into those locked before. An
// input that changed is refused (a line added to changed) only when the
// job holds results of it; one that never produced a result (the run was
// stopped early, or refused) is simply locked as it is now.
func mergeLocked(what string, was, now []lockedInput, changed *[]string, hasResults func(string) bool) []lockedInput {
	merged := slices.Clone(was)
	for _, n := range now {
		i := slices.IndexFunc(was, func(w lockedInput) bool { return w.Name == n.Name })
		switch {
		case i < 0:
			merged = append(merged, n)
		case was[i].Digest == n.Digest:
		case hasResults(n.Name):
			*changed = append(*changed, fmt.Sprintf("%s %s changed: %s was %s when the job started, it is %s now (%s)", what, n.Name, was[i].Path, was[i].Digest, n.Digest, n.Path))
		default:
			merged[i] = n
		}
	}
	return merged
}

// lockFolder takes the job folder for this process: two runs writing one
// job would move each other's live trials aside and mix their files. The
// lock is the kernel's (flock), so a crashed run holds it no longer.
func lockFolder(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("job folder: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another troupe run is using the job folder %s: wait for it, stop it, or give this run another --out", dir)
		}
		return nil, fmt.Errorf("lock the job folder %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
