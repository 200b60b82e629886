package dataset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

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
