package dataset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/troupebench/troupe/task/taskfs"
)

// Conditions of a *FetchError that callers test.
var (
	// ErrNoCommit: the pinned commit is not in the repository.
	ErrNoCommit = errors.New("the pinned commit is not in the repository")
	// ErrNoTask: the commit has no task folder (with a task.toml) at the
	// task's path.
	ErrNoTask = errors.New("no task at that path")
)

// FetchError is a task of a dataset that could not be fetched.
type FetchError struct {
	Dataset string
	Task    TaskRef
	Err     error
}

func (e *FetchError) Error() string {
	return fmt.Sprintf("dataset %s, task %s (%s at %s of %s): %v", e.Dataset, e.Task.Name, e.Task.Path, e.Task.GitCommit, e.Task.GitURL, e.Err)
}

func (e *FetchError) Unwrap() error { return e.Err }

// DefaultCacheDir is the cache Fetch uses by default: troupe/datasets in the
// user's cache folder (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on
// Linux).
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("dataset cache: %w", err)
	}
	return filepath.Join(dir, "troupe", "datasets"), nil
}

var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Check says whether troupe can fetch every task of d: each names a git
// repository, a full commit id (troupe fetches pinned commits only, where
// Harbor also takes a branch's head) and a folder inside the repository.
func (d *Dataset) Check() error {
	var errs []error
	if len(d.Tasks) == 0 {
		errs = append(errs, fmt.Errorf("dataset %s has no tasks", d.Ref()))
	}
	for i, t := range d.Tasks {
		problem := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("dataset %s, task %d (%s): %s", d.Ref(), i+1, t.Name, fmt.Sprintf(format, args...)))
		}
		commit := strings.ToLower(t.GitCommit)
		switch {
		case t.GitURL == "":
			problem("no git_url: troupe fetches tasks from git repositories (give a local task folder to --tasks)")
		case commit == "":
			problem("no git_commit_id: troupe fetches pinned commits only")
		case len(commit) == 64 && strings.Trim(commit, "0123456789abcdef") == "":
			problem("%s is a SHA-256 commit id: troupe reads SHA-1 repositories only", t.GitCommit)
		case !fullCommit.MatchString(commit):
			problem("git_commit_id %q is not a full commit id (40 hex digits): troupe fetches pinned commits only", t.GitCommit)
		}
		if _, ok := cleanPath(t.Path); !ok {
			problem("path %q is not a folder inside the repository (a relative path without . or ..)", t.Path)
		}
	}
	return errors.Join(errs...)
}

// cleanPath is a task's path as git names it, or false when it is not a
// folder inside the repository.
func cleanPath(p string) (string, bool) {
	p = strings.TrimSuffix(p, "/")
	return p, fs.ValidPath(p) && p != "."
}

// Fetcher fetches datasets into a cache. The zero Fetcher uses the default
// cache and says nothing.
type Fetcher struct {
	// CacheDir holds the clones and the fetched tasks; "" is
	// DefaultCacheDir.
	CacheDir string
	// Log gets a line for each clone, fetch and task fetched again; nil
	// discards them.
	Log io.Writer
	// Progress gets git's own progress while cloning and fetching (as git
	// clone shows it on a terminal); nil discards it.
	Progress io.Writer
	// Limits bound each task and each clone; zero fields are
	// DefaultLimits'.
	Limits Limits
}

// Fetch fetches the tasks of ds into cacheDir ("" is DefaultCacheDir) and
// returns their folders, in the dataset's order.
func Fetch(ctx context.Context, ds *Dataset, cacheDir string) ([]string, error) {
	return (&Fetcher{CacheDir: cacheDir}).Fetch(ctx, ds)
}

// Fetch makes every task of ds a folder in the cache, and returns the
// folders in the dataset's order. A folder fetched before is used as it is
// when its digest is the one recorded (no network); any other is read out
// of its pinned commit, cloning the repository (once per URL, kept in the
// cache) or fetching from it when the clone lacks the commit. A local
// repository (a path or a file:// URL) is read in place. A dataset that
// Check refuses fetches nothing; otherwise every task that could not be
// fetched is returned, each a *FetchError.
func (f *Fetcher) Fetch(ctx context.Context, ds *Dataset) ([]string, error) {
	if err := ds.Check(); err != nil {
		return nil, err
	}
	cache := f.CacheDir
	if cache == "" {
		var err error
		if cache, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	for _, sub := range []string{"repos", "tasks"} {
		if err := os.MkdirAll(filepath.Join(cache, sub), 0o755); err != nil {
			return nil, fmt.Errorf("dataset cache: %w", err)
		}
	}
	unlock, err := lockCache(ctx, cache, f.log())
	if err != nil {
		return nil, err
	}
	defer unlock()

	s := &session{Fetcher: f, cache: cache, sources: map[string]*source{}, limits: f.Limits.orDefault()}
	var dirs []string
	var errs []error
	same := 0
	for _, t := range ds.Tasks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dir, err := s.task(ctx, t)
		switch {
		case errors.Is(err, errReported):
			same++
		case err != nil:
			errs = append(errs, &FetchError{Dataset: ds.Ref(), Task: t, Err: err})
		default:
			dirs = append(dirs, dir)
		}
	}
	if same > 0 {
		noun := "tasks"
		if same == 1 {
			noun = "task"
		}
		errs = append(errs, fmt.Errorf("and %d more %s of dataset %s, at the same commits of the same repositories, for the same reasons", same, noun, ds.Ref()))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return dirs, nil
}

func (f *Fetcher) log() io.Writer {
	if f.Log == nil {
		return io.Discard
	}
	return f.Log
}

// errReported stands for an error already returned for another task of the
// same repository (a clone that failed) or commit (missing), so that it is
// said once.
var errReported = errors.New("reported")

// session is one Fetch: the repositories it opened, by URL.
type session struct {
	*Fetcher
	cache   string
	sources map[string]*source
	limits  Limits
}

// record is what fetched.json says of a task folder in the cache.
type record struct {
	GitURL    string `json:"git_url"`
	GitCommit string `json:"git_commit_id"`
	Path      string `json:"path"`
	// Tree is the git id of the task's folder in the commit.
	Tree string `json:"tree"`
	// Digest is taskfs.Digest of the folder as written: the task's
	// digest, as a job's lock file records it.
	Digest string `json:"digest"`
}

// id names a cache entry after what it holds.
func id(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:8])
}

// task returns the task's folder in the cache, fetching it when it is not
// there or not as recorded.
func (s *session) task(ctx context.Context, t TaskRef) (string, error) {
	p, _ := cleanPath(t.Path)
	commit := strings.ToLower(t.GitCommit)
	want := record{GitURL: t.GitURL, GitCommit: commit, Path: p}
	entry := filepath.Join(s.cache, "tasks", id(want.GitURL, want.GitCommit, want.Path))
	dir := filepath.Join(entry, path.Base(p))
	switch why := verifyCached(entry, dir, want); why {
	case "":
		return dir, nil
	case notCached:
	default:
		fmt.Fprintf(s.log(), "task %s: the cached copy %s %s: fetching it again\n", t.Name, dir, why)
	}

	src := s.open(ctx, t.GitURL)
	if src.err != nil {
		if src.reported {
			return "", errReported
		}
		src.reported = true
		return "", src.err
	}
	hash := plumbing.NewHash(commit)
	if src.missing[hash] {
		return "", errReported
	}
	if err := s.ensureCommit(ctx, src, hash); err != nil {
		if errors.Is(err, ErrNoCommit) {
			src.missing[hash] = true
		}
		return "", err
	}

	tmp, err := os.MkdirTemp(filepath.Join(s.cache, "tasks"), ".fetch-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // after the rename, nothing is left in it
	tmpDir := filepath.Join(tmp, path.Base(p))
	tree, err := extract(src.repo.Storer, hash, p, tmpDir, &budget{Limits: s.limits, task: p})
	if err != nil {
		return "", err
	}
	// Each link was checked as it was written; a chain of them, each
	// inside, can still lead out. Such a task is refused here, before
	// anything reads it.
	if err := checkLinks(tmpDir, p); err != nil {
		return "", err
	}
	if info, err := os.Stat(filepath.Join(tmpDir, "task.toml")); err != nil || !info.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s holds no task.toml in that commit: it is not a Harbor task", ErrNoTask, p)
	}
	digest, err := taskfs.Digest(tmpDir)
	if err != nil {
		return "", err
	}
	want.Tree, want.Digest = tree.String(), "sha256:"+digest
	data, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "fetched.json"), append(data, '\n'), 0o644); err != nil {
		return "", err
	}
	if err := os.RemoveAll(entry); err != nil {
		return "", fmt.Errorf("remove the stale copy: %w", err)
	}
	if err := os.Rename(tmp, entry); err != nil {
		return "", err
	}
	return dir, nil
}

// notCached is what verifyCached says of a task never fetched.
const notCached = "is not there"

// verifyCached says what is wrong with a cached task folder, "" when it is
// the one recorded, with the recorded digest.
func verifyCached(entry, dir string, want record) string {
	data, err := os.ReadFile(filepath.Join(entry, "fetched.json"))
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(entry); errors.Is(err, fs.ErrNotExist) {
			return notCached
		}
		return "has no record of what it is"
	}
	var got record
	if err != nil || json.Unmarshal(data, &got) != nil {
		return "has an unreadable record"
	}
	if got.GitURL != want.GitURL || got.GitCommit != want.GitCommit || got.Path != want.Path {
		return "records another task"
	}
	digest, err := taskfs.Digest(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "is missing"
	case err != nil:
		return "cannot be read"
	case "sha256:"+digest != got.Digest:
		return "was changed since it was fetched (its digest differs)"
	}
	return ""
}

// checkLinks refuses a fetched task folder with a link that leads out of
// it, resolved step by step (taskfs), naming the link by its path in the
// repository.
func checkLinks(dir, p string) error {
	d, err := taskfs.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	err = d.CheckLinks(".")
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range unjoin(err) {
		if le, ok := errors.AsType[*taskfs.LinkError](e); ok {
			errs = append(errs, fmt.Errorf("%s: %s links to %q, and the links it passes through lead outside the task folder", path.Join(p, le.Name), le.Name, le.Target))
			continue
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
