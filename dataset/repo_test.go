package dataset

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
)

// testRepo is a real git repository made with go-git: two commits of
// Harbor tasks under tasks/.
type testRepo struct {
	dir string
	// first and second are the commits: the first has tasks hello and
	// world; the second changes hello's instruction and adds later.
	first, second string
}

// newTestRepo makes the repository in a temporary folder.
func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	r := &testRepo{dir: filepath.Join(t.TempDir(), "tasks-repo")}
	repo, err := git.PlainInit(r.dir, false)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	addTask(files, "hello", "Write hello to /app/out.txt.\n")
	addTask(files, "world", "Write world to /app/out.txt.\n")
	files["README.md"] = "tasks for troupe's dataset tests\n"
	r.first = commit(t, repo, r.dir, files, "two tasks")
	files = map[string]string{}
	addTask(files, "later", "A task added later.\n")
	files["tasks/hello/instruction.md"] = "Write HELLO, in capitals, to /app/out.txt.\n"
	r.second = commit(t, repo, r.dir, files, "change hello, add later")
	return r
}

// addTask adds a Harbor task's files under tasks/<name>.
func addTask(files map[string]string, name, instruction string) {
	dir := "tasks/" + name + "/"
	files[dir+"task.toml"] = "version = \"1.0\"\n\n[agent]\ntimeout_sec = 60.0\n"
	files[dir+"instruction.md"] = instruction
	files[dir+"environment/Dockerfile"] = "FROM busybox:latest\nWORKDIR /app\n"
	files[dir+"tests/test.sh"] = "#!/bin/sh\ngrep -q . /app/out.txt && echo 1 > /logs/verifier/reward.txt\n"
	files[dir+"tests/config -> ../environment"] = "" // a symlink inside the task
}

// taskRepo makes an empty repository with the task's files (addTask) in
// its work tree, uncommitted: a test adds its own, then commits.
func taskRepo(t *testing.T, name string) (dir string, repo *git.Repository, files map[string]string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "repo")
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	files = map[string]string{}
	addTask(files, name, "x\n")
	return dir, repo, files
}

// commit writes the files (a name "a -> b" is a symlink a to b; a .sh file
// is executable) and commits everything.
func commit(t *testing.T, repo *git.Repository, dir string, files map[string]string, msg string) string {
	t.Helper()
	for name, body := range files {
		link, target, isLink := strings.Cut(name, " -> ")
		p := filepath.Join(dir, filepath.FromSlash(link))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case isLink:
			os.Remove(p)
			err = os.Symlink(target, p)
		case strings.HasSuffix(name, ".sh"):
			err = os.WriteFile(p, []byte(body), 0o755)
		default:
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "troupe test", Email: "test@troupe.invalid", When: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// registryFile writes a registry of the datasets and returns its path.
func registryFile(t *testing.T, datasets ...map[string]any) string {
	t.Helper()
	data, err := json.MarshalIndent(datasets, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// datasetDoc is a registry entry whose tasks are paths at a commit of url.
func datasetDoc(name, version, url, commit string, paths ...string) map[string]any {
	var tasks []map[string]any
	for _, p := range paths {
		tasks = append(tasks, map[string]any{"name": filepath.Base(p), "git_url": url, "git_commit_id": commit, "path": p})
	}
	return map[string]any{"name": name, "version": version, "description": name + " for tests", "tasks": tasks}
}

// gitServer serves the repositories under root over git's smart HTTP
// protocol (fetches only) with go-git's own server, and counts the
// requests: a real remote for clone and fetch, on the loopback.
func gitServer(t *testing.T, root string) (url string, requests *atomic.Int64) {
	t.Helper()
	srv := server.NewServer(server.NewFilesystemLoader(osfs.New(root)))
	requests = new(atomic.Int64)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		repoPath, _, _ := strings.Cut(r.URL.Path, "/info/refs")
		repoPath = strings.TrimSuffix(repoPath, "/git-upload-pack")
		// go-git's loader opens a repository's git folder.
		ep, err := transport.NewEndpoint("file://" + repoPath + "/.git")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sess, err := srv.NewUploadPackSession(ep, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		defer sess.Close()
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") == "git-upload-pack":
			ar, err := sess.AdvertisedReferencesContext(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			ar.Prefix = [][]byte{[]byte("# service=git-upload-pack"), pktline.Flush}
			w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
			ar.Encode(w)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
			req := packp.NewUploadPackRequest()
			if err := req.Decode(r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			resp, err := sess.UploadPack(r.Context(), req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
			resp.Encode(w)
		default:
			http.Error(w, "this test server only serves git-upload-pack", http.StatusForbidden)
		}
	})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL, requests
}
