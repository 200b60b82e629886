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
	"slices"
	"strings"
	"syscall"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
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

// source is an opened repository.
type source struct {
	url  string
	repo *git.Repository
	// local repositories are read in place, never fetched from.
	local bool
	// fetched is set once the repository was cloned or fetched in this
	// session: it holds what its remote has.
	fetched bool
	// err is why it could not be opened; reported says it was returned.
	err      error
	reported bool
	// missing are the commits found missing, already reported.
	missing map[plumbing.Hash]bool
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

// open opens the repository at url once per session: in place when it is
// local, else its clone in the cache, cloning it when there is none.
func (s *session) open(ctx context.Context, url string) *source {
	if src, ok := s.sources[url]; ok {
		return src
	}
	src := &source{url: url, missing: map[plumbing.Hash]bool{}}
	s.sources[url] = src
	if dir, ok := localPath(url); ok {
		src.local = true
		src.repo, src.err = git.PlainOpen(dir)
		if src.err != nil {
			src.err = fmt.Errorf("open the repository: %w", src.err)
		}
		return src
	}
	dir := filepath.Join(s.cache, "repos", id(url))
	repo, err := s.openClone(dir, url)
	if err == nil && originIs(repo, url) {
		src.repo = repo
		return src
	}
	if _, statErr := os.Stat(dir); statErr == nil {
		fmt.Fprintf(s.log(), "the cached clone of %s is not usable: cloning it again\n", url)
		if err := os.RemoveAll(dir); err != nil {
			src.err = err
			return src
		}
	}
	src.repo, src.err = s.clone(ctx, url, dir)
	src.fetched = src.err == nil
	return src
}

// clone makes a bare, full clone of url at dir. A full clone, not a shallow
// one of the pinned commit: not every server gives a commit by its id.
func (s *session) clone(ctx context.Context, url, dir string) (*git.Repository, error) {
	fmt.Fprintf(s.log(), "cloning %s into %s\n", url, dir)
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".clone-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	st := &boundedStorage{Storage: filesystem.NewStorage(osfs.New(tmp), cache.NewObjectLRUDefault()), url: url, limit: s.limits.CloneBytes}
	_, err = git.CloneContext(ctx, st, nil, &git.CloneOptions{URL: url, Progress: s.Progress})
	if err != nil {
		return nil, fmt.Errorf("clone: %w", err)
	}
	// A half-written clone is never at dir: the complete one is moved there.
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	return s.openClone(dir, url)
}

// openClone opens the bare clone at dir with its fetches bounded by the
// clone limit, as the clone itself was.
func (s *session) openClone(dir, url string) (*git.Repository, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, git.ErrRepositoryNotExists
	}
	st := &boundedStorage{Storage: filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault()), url: url, limit: s.limits.CloneBytes}
	return git.Open(st, nil)
}

func originIs(repo *git.Repository, url string) bool {
	r, err := repo.Remote("origin")
	return err == nil && slices.Equal(r.Config().URLs, []string{url})
}

// localPath is the folder of a local repository URL: a file:// URL or a
// path; scp-like addresses (git@host:org/repo) are remote, as for git.
func localPath(url string) (string, bool) {
	if p, ok := strings.CutPrefix(url, "file://"); ok {
		return p, true
	}
	if strings.Contains(url, "://") {
		return "", false
	}
	if colon := strings.IndexByte(url, ':'); colon >= 0 && !strings.Contains(url[:colon], "/") {
		return "", false
	}
	return url, true
}

// ensureCommit makes the commit present in src: a clone lacking it fetches
// its branches and tags, then the commit by its id.
func (s *session) ensureCommit(ctx context.Context, src *source, hash plumbing.Hash) error {
	if hasCommit(src.repo, hash) {
		return nil
	}
	if src.local {
		return ErrNoCommit
	}
	if !src.fetched {
		fmt.Fprintf(s.log(), "fetching %s: the cached clone lacks commit %.12s\n", src.url, hash)
		err := src.repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", Tags: git.AllTags, Progress: s.Progress})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return fmt.Errorf("fetch: %w", err)
		}
		src.fetched = true
		if hasCommit(src.repo, hash) {
			return nil
		}
	}
	// A commit that no branch or tag holds (any more) can still be given
	// by its id by servers that allow it; the ref keeps it in the clone.
	spec := gitconfig.RefSpec(fmt.Sprintf("+%s:refs/troupe/%s", hash, hash))
	err := src.repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: []gitconfig.RefSpec{spec}, Progress: s.Progress})
	if hasCommit(src.repo, hash) {
		return nil
	}
	if err == nil || errors.Is(err, git.NoErrAlreadyUpToDate) {
		err = errors.New("the server sent nothing")
	}
	return fmt.Errorf("%w: none of its branches and tags holds it, and fetching it by its id failed: %v", ErrNoCommit, err)
}

func hasCommit(repo *git.Repository, hash plumbing.Hash) bool {
	_, err := repo.Storer.EncodedObject(plumbing.CommitObject, hash)
	return err == nil
}

// extract writes the folder at p of the commit into dest, checking every
// object read against its id: what is written is what the commit names.
// It returns the folder's tree id.
func extract(st storer.EncodedObjectStorer, commit plumbing.Hash, p, dest string, b *budget) (plumbing.Hash, error) {
	obj, err := verified(st, plumbing.CommitObject, commit)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	c, err := object.DecodeCommit(st, obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("commit %s: %w", commit, err)
	}
	tree := c.TreeHash
	walked := ""
	for _, name := range strings.Split(p, "/") {
		t, err := readTree(st, tree)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		i := slices.IndexFunc(t.Entries, func(e object.TreeEntry) bool { return e.Name == name })
		if i < 0 || t.Entries[i].Mode != filemode.Dir {
			return plumbing.ZeroHash, fmt.Errorf("%w: the commit has no folder %s (%s)", ErrNoTask, path.Join(walked, name), listing(walked, t))
		}
		tree, walked = t.Entries[i].Hash, path.Join(walked, name)
	}
	if err := os.Mkdir(dest, 0o755); err != nil {
		return plumbing.ZeroHash, err
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer root.Close()
	return tree, writeTree(st, root, ".", tree, b)
}

// listing says what a folder of the commit holds, for a message.
func listing(dir string, t *object.Tree) string {
	var names []string
	for _, e := range t.Entries {
		if e.Mode == filemode.Dir {
			names = append(names, e.Name+"/")
		}
	}
	where := "its top level"
	if dir != "" {
		where = dir
	}
	switch {
	case len(names) == 0:
		return where + " holds no folder"
	case len(names) > 10:
		names = append(names[:10], fmt.Sprintf("and %d more", len(names)-10))
	}
	return where + " holds " + strings.Join(names, ", ")
}

// writeTree writes the tree's entries into dir, a folder of root.
func writeTree(st storer.EncodedObjectStorer, root *os.Root, dir string, h plumbing.Hash, b *budget) error {
	t, err := readTree(st, h)
	if err != nil {
		return err
	}
	for _, e := range t.Entries {
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\x00") {
			return fmt.Errorf("tree %s has an entry named %q", h, e.Name)
		}
		rel := path.Join(dir, e.Name)
		if err := b.entry(); err != nil {
			return err
		}
		switch e.Mode {
		case filemode.Dir:
			if err := root.Mkdir(rel, 0o755); err != nil {
				return err
			}
			if err := writeTree(st, root, rel, e.Hash, b); err != nil {
				return err
			}
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			perm := os.FileMode(0o644)
			if e.Mode == filemode.Executable {
				perm = 0o755
			}
			if err := writeBlob(st, root, rel, e.Hash, perm, b); err != nil {
				return err
			}
		case filemode.Symlink:
			if err := writeSymlink(st, root, rel, e.Hash); err != nil {
				return err
			}
		case filemode.Submodule:
			return fmt.Errorf("%s is a git submodule, which troupe does not fetch", rel)
		default:
			return fmt.Errorf("%s has the mode %s, which is not a file, folder or link", rel, e.Mode)
		}
	}
	return nil
}

// sizer is go-git's filesystem storage: it reads an object's size from its
// header, where EncodedObject may read (and inflate) the whole object.
type sizer interface {
	EncodedObjectSize(plumbing.Hash) (int64, error)
}

func writeBlob(st storer.EncodedObjectStorer, root *os.Root, rel string, h plumbing.Hash, perm os.FileMode, b *budget) (err error) {
	// A blob over the limits is refused from its header, before it is
	// read, let alone written.
	if sz, ok := st.(sizer); ok {
		if size, err := sz.EncodedObjectSize(h); err == nil {
			if err := b.check(path.Join(b.task, rel), size); err != nil {
				return err
			}
		}
	}
	obj, err := st.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return fmt.Errorf("%s: blob %s: %w", rel, h, err)
	}
	if err := b.file(path.Join(b.task, rel), obj.Size()); err != nil {
		return err
	}
	r, err := obj.Reader()
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	defer r.Close()
	f, err := root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	hasher := plumbing.NewHasher(plumbing.BlobObject, obj.Size())
	// A blob that reads longer than its header says is cut one byte past
	// it, and refused by its hash.
	if _, err := io.Copy(io.MultiWriter(f, hasher), io.LimitReader(r, obj.Size()+1)); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if got := hasher.Sum(); got != h {
		return fmt.Errorf("%s: the repository's blob %s reads as %s: the repository is damaged", rel, h, got)
	}
	return nil
}

// writeSymlink writes a link that stays inside the task folder; one that
// points out of it (absolute, or up past the top) would make the task
// depend on the machine it runs on.
func writeSymlink(st storer.EncodedObjectStorer, root *os.Root, rel string, h plumbing.Hash) error {
	obj, err := verified(st, plumbing.BlobObject, h)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	r, err := obj.Reader()
	if err != nil {
		return err
	}
	target, err := io.ReadAll(io.LimitReader(r, 4096))
	r.Close()
	if err != nil {
		return err
	}
	if t := string(target); path.IsAbs(t) || !fs.ValidPath(path.Join(path.Dir(rel), t)) {
		return fmt.Errorf("%s links to %q, outside the task folder", rel, t)
	}
	return root.Symlink(string(target), rel)
}

func readTree(st storer.EncodedObjectStorer, h plumbing.Hash) (*object.Tree, error) {
	obj, err := verified(st, plumbing.TreeObject, h)
	if err != nil {
		return nil, err
	}
	t, err := object.DecodeTree(st, obj)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", h, err)
	}
	return t, nil
}

// verified reads an object and checks that its content hashes to its id.
func verified(st storer.EncodedObjectStorer, t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	obj, err := st.EncodedObject(t, h)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", t, h, err)
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", t, h, err)
	}
	defer r.Close()
	hasher := plumbing.NewHasher(t, obj.Size())
	if _, err := io.Copy(hasher, r); err != nil {
		return nil, fmt.Errorf("%s %s: %w", t, h, err)
	}
	if got := hasher.Sum(); got != h {
		return nil, fmt.Errorf("%s %s reads as %s: the repository is damaged", t, h, got)
	}
	return obj, nil
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

// lockCache takes the cache for this process: two Fetches writing one cache
// would replace each other's folders. The lock is the kernel's (flock), so
// a troupe that died holds it no longer.
func lockCache(ctx context.Context, dir string, log io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dataset cache: %w", err)
	}
	fd := int(f.Fd())
	err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return func() { f.Close() }, nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, fmt.Errorf("lock the dataset cache %s: %w", dir, err)
	}
	fmt.Fprintf(log, "waiting for another troupe that is fetching into %s\n", dir)
	// flock cannot be cancelled: it waits in a goroutine that ends when it
	// has the lock, and releases it at once if the caller gave up by then.
	got := make(chan error)
	gaveUp := make(chan struct{})
	go func() {
		err := syscall.Flock(fd, syscall.LOCK_EX)
		select {
		case got <- err:
		case <-gaveUp:
			f.Close()
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock the dataset cache %s: %w", dir, err)
		}
		return func() { f.Close() }, nil
	case <-ctx.Done():
		close(gaveUp)
		return nil, ctx.Err()
	}
}
