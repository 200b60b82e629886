package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/troupebench/troupe/task"
)

// lookup parses a registry of the datasets and looks one up.
func lookup(t *testing.T, ref string, datasets ...map[string]any) *Dataset {
	t.Helper()
	reg, err := Load(t.Context(), registryFile(t, datasets...), nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := reg.Lookup(ref)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestFetchChecksOutThePinnedCommit(t *testing.T) {
	repo := newTestRepo(t)
	for _, url := range []string{repo.dir, "file://" + repo.dir} {
		t.Run(url, func(t *testing.T) {
			cache := t.TempDir()
			v1 := lookup(t, "demo@1.0",
				datasetDoc("demo", "1.0", url, repo.first, "tasks/hello", "tasks/world/"),
				datasetDoc("demo", "2.0", url, repo.second, "tasks/hello", "tasks/world", "tasks/later"))
			dirs, err := Fetch(t.Context(), v1, cache)
			if err != nil {
				t.Fatal(err)
			}
			if len(dirs) != 2 || filepath.Base(dirs[0]) != "hello" || filepath.Base(dirs[1]) != "world" {
				t.Fatalf("got %q", dirs)
			}
			if got := read(t, filepath.Join(dirs[0], "instruction.md")); got != "Write hello to /app/out.txt.\n" {
				t.Errorf("hello at the first commit says %q", got)
			}
			if info, err := os.Stat(filepath.Join(dirs[0], "tests", "test.sh")); err != nil || info.Mode().Perm() != 0o755 {
				t.Errorf("tests/test.sh: %v, %v; want it executable", info.Mode(), err)
			}
			if target, err := os.Readlink(filepath.Join(dirs[0], "tests", "config")); err != nil || target != "../environment" {
				t.Errorf("symlink: %q, %v", target, err)
			}
			for _, d := range dirs {
				tk, err := task.Load(d, task.Options{})
				if err != nil {
					t.Fatal(err)
				}
				var rec record
				if err := json.Unmarshal([]byte(read(t, filepath.Join(filepath.Dir(d), "fetched.json"))), &rec); err != nil {
					t.Fatal(err)
				}
				if rec.Digest != tk.Digest || rec.GitCommit != repo.first || rec.GitURL != url || rec.Tree == "" {
					t.Errorf("fetched.json: %+v; the task's digest is %s", rec, tk.Digest)
				}
			}

			v2 := lookup(t, "demo", // no version: the newest, 2.0
				datasetDoc("demo", "1.0", url, repo.first, "tasks/hello"),
				datasetDoc("demo", "2.0", url, repo.second, "tasks/hello", "tasks/world", "tasks/later"))
			dirs2, err := Fetch(t.Context(), v2, cache)
			if err != nil {
				t.Fatal(err)
			}
			if len(dirs2) != 3 || dirs2[0] == dirs[0] || dirs2[1] == dirs[1] {
				t.Fatalf("got %q after %q: each commit has its own folders", dirs2, dirs)
			}
			if got := read(t, filepath.Join(dirs2[0], "instruction.md")); !strings.Contains(got, "HELLO") {
				t.Errorf("hello at the second commit says %q", got)
			}
			if got := read(t, filepath.Join(dirs[0], "instruction.md")); strings.Contains(got, "HELLO") {
				t.Errorf("the first commit's hello changed: %q", got)
			}
		})
	}
}

func TestFetchClonesOnceAndReusesTheCache(t *testing.T) {
	repo := newTestRepo(t)
	base, requests := gitServer(t, filepath.Dir(repo.dir))
	url := base + "/tasks-repo"
	cache := t.TempDir()
	var log bytes.Buffer
	f := &Fetcher{CacheDir: cache, Log: &log}
	v1 := lookup(t, "demo@1.0", datasetDoc("demo", "1.0", url, repo.first, "tasks/hello", "tasks/world"))

	dirs, err := f.Fetch(t.Context(), v1)
	if err != nil {
		t.Fatal(err)
	}
	if requests.Load() == 0 || !strings.Contains(log.String(), "cloning "+url) {
		t.Fatalf("%d requests, log:\n%s", requests.Load(), &log)
	}
	clones, _ := filepath.Glob(filepath.Join(cache, "repos", "*"))
	if len(clones) != 1 {
		t.Fatalf("want one clone, found %q", clones)
	}
	// A marker in the clone tells whether it is the same clone later.
	marker := filepath.Join(clones[0], "troupe-test-marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dirs[0], "instruction.md"))
	if err != nil {
		t.Fatal(err)
	}

	// Again: every task is in the cache, as recorded; no request at all.
	requests.Store(0)
	log.Reset()
	again, err := f.Fetch(t.Context(), v1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again, dirs) || requests.Load() != 0 || log.Len() != 0 {
		t.Fatalf("second fetch: %q (first %q), %d requests, log:\n%s", again, dirs, requests.Load(), &log)
	}
	if info2, err := os.Stat(filepath.Join(dirs[0], "instruction.md")); err != nil || !os.SameFile(info, info2) {
		t.Error("the cached task was written again")
	}

	// Another commit that the clone has: read from the clone, no request.
	v2 := lookup(t, "demo@2.0", datasetDoc("demo", "2.0", url, repo.second, "tasks/later"))
	if _, err := f.Fetch(t.Context(), v2); err != nil || requests.Load() != 0 {
		t.Fatalf("%v, %d requests", err, requests.Load())
	}

	// A commit made after the clone: fetched into the same clone.
	r, err := git.PlainOpen(repo.dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	addTask(files, "newest", "The newest task.\n")
	third := commit(t, r, repo.dir, files, "a third commit")
	v3 := lookup(t, "demo@3.0", datasetDoc("demo", "3.0", url, third, "tasks/newest", "tasks/hello"))
	dirs3, err := f.Fetch(t.Context(), v3)
	if err != nil {
		t.Fatal(err)
	}
	if requests.Load() == 0 || !strings.Contains(log.String(), "fetching "+url) || strings.Contains(log.String(), "cloning") {
		t.Errorf("%d requests, log:\n%s", requests.Load(), &log)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the clone was made again: %v", err)
	}
	if got := read(t, filepath.Join(dirs3[0], "instruction.md")); got != "The newest task.\n" {
		t.Errorf("got %q", got)
	}
}

func TestFetchRestoresATamperedTask(t *testing.T) {
	repo := newTestRepo(t)
	base, requests := gitServer(t, filepath.Dir(repo.dir))
	url := base + "/tasks-repo"
	var log bytes.Buffer
	f := &Fetcher{CacheDir: t.TempDir(), Log: &log}
	ds := lookup(t, "demo@1.0", datasetDoc("demo", "1.0", url, repo.first, "tasks/hello", "tasks/world"))
	dirs, err := f.Fetch(t.Context(), ds)
	if err != nil {
		t.Fatal(err)
	}
	for name, tamper := range map[string]func(dir string) error{
		"edited": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "instruction.md"), []byte("rm -rf /\n"), 0o644)
		},
		"added":   func(dir string) error { return os.WriteFile(filepath.Join(dir, "tests", "extra.sh"), nil, 0o755) },
		"removed": func(dir string) error { return os.Remove(filepath.Join(dir, "tests", "test.sh")) },
		"chmod":   func(dir string) error { return os.Chmod(filepath.Join(dir, "tests", "test.sh"), 0o644) },
		"record":  func(dir string) error { return os.Remove(filepath.Join(filepath.Dir(dir), "fetched.json")) },
		"gone":    func(dir string) error { return os.RemoveAll(dir) },
	} {
		t.Run(name, func(t *testing.T) {
			if err := tamper(dirs[0]); err != nil {
				t.Fatal(err)
			}
			log.Reset()
			requests.Store(0)
			again, err := f.Fetch(t.Context(), ds)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(again, dirs) || !strings.Contains(log.String(), "task hello: the cached copy") || strings.Contains(log.String(), "task world") {
				t.Errorf("got %q, log:\n%s", again, &log)
			}
			if requests.Load() != 0 {
				t.Errorf("%d requests: the clone has the commit", requests.Load())
			}
			if got := read(t, filepath.Join(dirs[0], "instruction.md")); got != "Write hello to /app/out.txt.\n" {
				t.Errorf("not restored: %q", got)
			}
			if _, err := os.Stat(filepath.Join(dirs[0], "tests", "extra.sh")); err == nil {
				t.Error("an added file was kept")
			}
			if info, err := os.Stat(filepath.Join(dirs[0], "tests", "test.sh")); err != nil || info.Mode().Perm() != 0o755 {
				t.Errorf("test.sh not restored: %v", err)
			}
		})
	}
}

func TestFetchMissingCommit(t *testing.T) {
	repo := newTestRepo(t)
	base, _ := gitServer(t, filepath.Dir(repo.dir))
	const missing = "0123456789abcdef0123456789abcdef01234567"
	for _, url := range []string{repo.dir, base + "/tasks-repo"} {
		t.Run(url, func(t *testing.T) {
			ds := lookup(t, "demo@1.0", datasetDoc("demo", "1.0", url, missing, "tasks/hello", "tasks/world"))
			dirs, err := Fetch(t.Context(), ds, t.TempDir())
			if !errors.Is(err, ErrNoCommit) || dirs != nil {
				t.Fatalf("got %q, %v; want ErrNoCommit", dirs, err)
			}
			fe, ok := errors.AsType[*FetchError](err)
			if !ok || fe.Task.Name != "hello" || fe.Dataset != "demo@1.0" {
				t.Errorf("want a *FetchError for hello, got %#v", err)
			}
			for _, want := range []string{"dataset demo@1.0, task hello (tasks/hello at " + missing + " of " + url + "): the pinned commit is not in the repository", "and 1 more task of dataset demo@1.0"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("want %q in:\n%v", want, err)
				}
			}
		})
	}
}

func TestFetchMissingPath(t *testing.T) {
	repo := newTestRepo(t)
	for _, tc := range []struct{ path, want string }{
		{"tasks/nope", "tasks/nope at " + repo.first + " of " + repo.dir + "): no task at that path: the commit has no folder tasks/nope (tasks holds hello/, world/)"},
		{"nope/hello", "has no folder nope (its top level holds tasks/)"},
		{"tasks/hello/instruction.md", "has no folder tasks/hello/instruction.md"},
		{"tasks", "tasks holds no task.toml in that commit: it is not a Harbor task"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			cache := t.TempDir()
			ds := lookup(t, "demo@1.0", datasetDoc("demo", "1.0", repo.dir, repo.first, tc.path))
			_, err := Fetch(t.Context(), ds, cache)
			if !errors.Is(err, ErrNoTask) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want ErrNoTask and %q", err, tc.want)
			}
			left, _ := os.ReadDir(filepath.Join(cache, "tasks"))
			if len(left) != 0 {
				t.Errorf("the cache kept %v", left)
			}
		})
	}
}

func TestFetchUnreachableRepositoryIsSaidOnce(t *testing.T) {
	repo := newTestRepo(t)
	base, _ := gitServer(t, filepath.Dir(repo.dir))
	url := base + "/no-such-repo"
	ds := lookup(t, "demo@1.0", datasetDoc("demo", "1.0", url, repo.first, "tasks/hello", "tasks/world"))
	_, err := Fetch(t.Context(), ds, t.TempDir())
	if err == nil || strings.Count(err.Error(), "clone: ") != 1 || !strings.Contains(err.Error(), "and 1 more task ") {
		t.Fatalf("want one clone error, got %v", err)
	}
}

func TestCheck(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name string
		task TaskRef
		want string
	}{
		{"pinned", TaskRef{Name: "t", GitURL: "u", GitCommit: strings.ToUpper(commit), Path: "a/b/"}, ""},
		{"no url", TaskRef{Name: "t", GitCommit: commit, Path: "p"}, "no git_url"},
		{"no commit", TaskRef{Name: "t", GitURL: "u", Path: "p"}, "no git_commit_id"},
		{"a branch", TaskRef{Name: "t", GitURL: "u", GitCommit: "main", Path: "p"}, `"main" is not a full commit id`},
		{"short", TaskRef{Name: "t", GitURL: "u", GitCommit: commit[:12], Path: "p"}, "not a full commit id"},
		{"sha256", TaskRef{Name: "t", GitURL: "u", GitCommit: commit + commit[:24], Path: "p"}, "SHA-256"},
		{"up", TaskRef{Name: "t", GitURL: "u", GitCommit: commit, Path: "../p"}, `path "../p" is not a folder inside`},
		{"inner up", TaskRef{Name: "t", GitURL: "u", GitCommit: commit, Path: "a/../../p"}, "not a folder inside"},
		{"absolute", TaskRef{Name: "t", GitURL: "u", GitCommit: commit, Path: "/p"}, "not a folder inside"},
		{"top", TaskRef{Name: "t", GitURL: "u", GitCommit: commit, Path: "."}, "not a folder inside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Dataset{Name: "d", Version: "1", Tasks: []TaskRef{tc.task}}).Check()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "dataset d@1, task 1 (t)") {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	if err := (&Dataset{Name: "d", Version: "1"}).Check(); err == nil || !strings.Contains(err.Error(), "has no tasks") {
		t.Errorf("empty dataset: %v", err)
	}
}

func TestFetchRefusesLinksOutOfTheTask(t *testing.T) {
	dir, r, files := taskRepo(t, "escape")
	files["tasks/escape/environment/secrets -> ../../../../etc"] = ""
	c := commit(t, r, dir, files, "a link out")
	ds := lookup(t, "d@1", datasetDoc("d", "1", dir, c, "tasks/escape"))
	if _, err := Fetch(t.Context(), ds, t.TempDir()); err == nil || !strings.Contains(err.Error(), `environment/secrets links to "../../../../etc", outside the task folder`) {
		t.Fatalf("got %v", err)
	}
}

func TestFetchersShareACache(t *testing.T) {
	repo := newTestRepo(t)
	base, _ := gitServer(t, filepath.Dir(repo.dir))
	ds := lookup(t, "demo@1.0", datasetDoc("demo", "1.0", base+"/tasks-repo", repo.first, "tasks/hello", "tasks/world"))
	cache := t.TempDir()
	var wg sync.WaitGroup
	results := make([][]string, 3)
	errs := make([]error, 3)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = Fetch(t.Context(), ds, cache) })
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil || !slices.Equal(results[i], results[0]) {
			t.Errorf("fetch %d: %q, %v", i, results[i], errs[i])
		}
	}
}
