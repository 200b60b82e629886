package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/troupebench/troupe/dataset"
	"github.com/troupebench/troupe/internal/harbormodel"
	"github.com/troupebench/troupe/task"
)

// datasetRepo commits the files into a new git repository (made with
// go-git) and returns its folder and the commit.
func datasetRepo(t *testing.T, files map[string]string) (dir, commit string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "repo")
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		write(t, filepath.Join(dir, name), body)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "t", Email: "t@troupe.invalid", When: time.Unix(1e9, 0)}
	h, err := wt.Commit("tasks", &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		t.Fatal(err)
	}
	return dir, h.String()
}

// datasetRegistry writes a registry.json whose datasets' tasks are paths at
// the commit of url.
func datasetRegistry(t *testing.T, dir, url, commit string, datasets map[string][]string) string {
	t.Helper()
	var list []map[string]any
	for ref, paths := range datasets {
		name, version, _ := strings.Cut(ref, "@")
		var tasks []map[string]string
		for _, p := range paths {
			tasks = append(tasks, map[string]string{"name": filepath.Base(p), "git_url": url, "git_commit_id": commit, "path": p})
		}
		list = append(list, map[string]any{"name": name, "version": version, "description": "The " + name + " tasks,\nversion " + version, "tasks": tasks})
	}
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "registry.json")
	write(t, p, string(data))
	return p
}

func harborTask(files map[string]string, dir string) {
	files[dir+"/task.toml"] = "version = \"1.0\"\n"
	files[dir+"/instruction.md"] = "Create /app/hello.txt containing Hello, world!\n"
	files[dir+"/environment/Dockerfile"] = "FROM busybox:latest\n"
	files[dir+"/tests/test.sh"] = "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n"
}

func TestDatasetsList(t *testing.T) {
	dir := isolate(t)
	reg := datasetRegistry(t, dir, "https://example.invalid/tasks.git", strings.Repeat("a", 40), map[string][]string{
		"terminal-bench@2.0":  {"a", "b", "c"},
		"terminal-bench@head": {"a"},
		"terminal-bench@1.10": {"a", "b"},
		"hello-world@1.0":     {"hello"},
	})
	code, out, errOut := troupe(t, "datasets", "list", "--registry", reg)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := []string{
		"NAME            VERSION  TASKS  DESCRIPTION",
		"hello-world     1.0      1      The hello-world tasks,",
		"terminal-bench  1.10     2      The terminal-bench tasks,",
		"terminal-bench  2.0      3      The terminal-bench tasks,",
		"terminal-bench  head     1      The terminal-bench tasks,",
		"4 datasets in " + reg + "; troupe run MANIFEST --dataset NAME@VERSION runs one",
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}

	// $TROUPE_REGISTRY names it too; --json prints one object a dataset.
	t.Setenv("TROUPE_REGISTRY", reg)
	code, out, errOut = troupe(t, "datasets", "list", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first datasetSummary
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || len(lines) != 4 {
		t.Fatalf("%v:\n%s", err, out)
	}
	if first != (datasetSummary{Name: "hello-world", Version: "1.0", Tasks: 1, Description: "The hello-world tasks,\nversion 1.0"}) {
		t.Errorf("got %+v", first)
	}

	// The config file's registry, relative to the file, is the last word.
	t.Setenv("TROUPE_REGISTRY", "")
	cfgDir := filepath.Join(dir, "conf")
	rel, _ := filepath.Rel(cfgDir, reg)
	write(t, filepath.Join(cfgDir, "troupe.yaml"), "registry: "+rel+"\n")
	code, out, errOut = troupe(t, "datasets", "list", "--config", filepath.Join(cfgDir, "troupe.yaml"))
	if code != exitOK || !strings.Contains(out, "4 datasets in "+reg) {
		t.Errorf("registry from the config file: exit %d: %s%s", code, out, errOut)
	}

	code, _, errOut = troupe(t, "datasets", "list", "--registry", filepath.Join(dir, "none.json"))
	if code != exitFailed || !strings.Contains(errOut, "none.json: open") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	write(t, reg, "[{\"name\": \"x\",\n \"version\": 1}]")
	code, _, errOut = troupe(t, "datasets", "list", "--registry", reg)
	if code != exitFailed || !strings.Contains(errOut, reg+":2:13: version must be a string") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	if code, out, _ := troupe(t, "datasets", "list", "--help"); code != exitOK || !strings.Contains(out, "troupe run team.yaml --dataset terminal-bench@2.0") {
		t.Errorf("--help: %d %q", code, out)
	}
}

func TestDatasetsResolveForRun(t *testing.T) {
	dir := isolate(t)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	files := map[string]string{}
	harborTask(files, "tasks/hello")
	harborTask(files, "tasks/world")
	repo, commit := datasetRepo(t, files)
	reg := datasetRegistry(t, dir, repo, commit, map[string][]string{
		"demo@1.0": {"tasks/hello", "tasks/world"},
		"demo@0.9": {"tasks/hello"},
	})
	var stderr bytes.Buffer
	dirs, origins, err := datasetTasks(t.Context(), &stderr, nil, []string{"demo", "demo@1.0"}, reg, dataset.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 2 || !strings.HasPrefix(dirs[0], filepath.Join(dir, "cache", "troupe", "datasets", "tasks")) {
		t.Fatalf("got %q", dirs)
	}
	for i, p := range []string{"tasks/hello", "tasks/world"} {
		want := task.Origin{Name: "demo", Version: "1.0", Registry: reg, GitURL: repo, GitCommit: commit, Path: p}
		if o := origins[dirs[i]]; o == nil || *o != want {
			t.Errorf("%s came from %+v, want %+v", dirs[i], o, want)
		}
	}
	if !strings.Contains(stderr.String(), "dataset demo@1.0: 2 tasks at pinned commits, from "+reg) {
		t.Errorf("stderr:\n%s", &stderr)
	}
	tasks, err := task.Find(dirs, task.Options{})
	if err != nil || len(tasks) != 2 || tasks[0].Name != "hello" || tasks[1].Name != "world" {
		t.Fatalf("%v: %v", tasks, err)
	}
}

func TestDatasetsRunRefusals(t *testing.T) {
	solo := repoPath(t, "examples/manifests/solo.yaml") // before isolate changes the folder
	dir := isolate(t)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	files := map[string]string{}
	harborTask(files, "tasks/hello")
	files["tasks/broken/task.toml"] = "version = \"1.0\"\n" // and nothing else
	harborTask(files, "tasks/big")
	files["tasks/big/environment/blob.bin"] = string(make([]byte, 2<<20))
	repo, commit := datasetRepo(t, files)
	reg := datasetRegistry(t, dir, repo, commit, map[string][]string{
		"terminal-bench@2.0": {"tasks/hello"},
		"broken@1":           {"tasks/broken"},
		"big@1":              {"tasks/big"},
	})
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no tasks", []string{solo}, exitUsage, []string{"--tasks PATH", "--dataset NAME@VERSION"}},
		{"unknown dataset", []string{solo, "--dataset", "terminal-bnech@2.0", "--registry", reg}, exitFailed,
			[]string{`--dataset terminal-bnech@2.0: no dataset is named "terminal-bnech" in ` + reg + "; did you mean terminal-bench?"}},
		{"unknown version", []string{solo, "--dataset", "terminal-bench@3", "--registry", reg}, exitFailed,
			[]string{"dataset terminal-bench has no version \"3\" in " + reg + "; it has 2.0"}},
		{"no registry", []string{solo, "--dataset", "x@1", "--registry", filepath.Join(dir, "none.json")}, exitFailed,
			[]string{"none.json: open"}},
		// The dataset's folders reach the task loader, which refuses
		// the broken one before any container starts.
		{"a dataset's task is loaded as --tasks loads its own", []string{solo, "--dataset", "broken@1", "--registry", reg}, exitFailed,
			[]string{filepath.Join(dir, "cache", "troupe", "datasets", "tasks"), "broken/instruction.md"}},
		{"a file over the limit", []string{solo, "--dataset", "big@1", "--registry", reg, "--dataset-max-file-mb", "1"}, exitFailed,
			[]string{"tasks/big/environment/blob.bin is 2097152 bytes, over 1 MiB, the limit of a file of a fetched task (--dataset-max-file-mb raises it)"}},
		{"a negative limit", []string{solo, "--dataset", "big@1", "--registry", reg, "--dataset-max-task-mb", "-1"}, exitFailed,
			[]string{"--dataset-max-task-mb must be 0 (the default) or more, not -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := troupe(t, append([]string{"run"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d: %s", code, tc.code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("want %q in:\n%s", w, errOut)
				}
			}
			if strings.Contains(errOut, solo) {
				t.Errorf("the manifest is valid:\n%s", errOut)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs")); err == nil {
		t.Error("a refused run made a job folder")
	}
}

// TestDatasetRunRecordsWhereTasksCameFrom runs a task of a dataset (a git
// repository the test makes, in a registry file): the trial records where
// its task came from as Harbor records a registry's task (a GitTaskId, the
// dataset's name as source, config.task the repository, commit and path),
// troupe's dataset field says it whole, with the version, and the job's
// config.json lists the dataset; each file is the Harbor model it stands
// for.
func TestDatasetRunRecordsWhereTasksCameFrom(t *testing.T) {
	root, _ := filepath.Abs("../..")
	dir := isolate(t)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	files := map[string]string{}
	harborTask(files, "tasks/hello")
	repo, commit := datasetRepo(t, files)
	reg := datasetRegistry(t, dir, repo, commit, map[string][]string{"demo@1.0": {"tasks/hello"}})
	job := filepath.Join(dir, "job")
	code, stdout, stderr := troupe(t, "run", filepath.Join(root, "examples/manifests/solo.yaml"), "--dataset", "demo@1.0", "--registry", reg, "--out", job)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	trialDir := filepath.Join(job, "hello__hello-solo-mock__1")
	var res struct {
		TaskID  map[string]string `json:"task_id"`
		Source  *string           `json:"source"`
		TaskDir string            `json:"task_path"`
		Config  struct {
			Task  map[string]any `json:"task"`
			JobID string         `json:"job_id"`
		} `json:"config"`
		Dataset map[string]string `json:"dataset"`
	}
	json.Unmarshal(harbormodel.TrialResult.CheckFile(t, filepath.Join(trialDir, "result.json")), &res)
	harbormodel.TrialConfig.CheckFile(t, filepath.Join(trialDir, "config.json"))
	if want := map[string]string{"git_url": repo, "git_commit_id": commit, "path": "tasks/hello"}; !maps.Equal(res.TaskID, want) {
		t.Errorf("task_id %v, want %v", res.TaskID, want)
	}
	if want := map[string]any{"git_url": repo, "git_commit_id": commit, "path": "tasks/hello", "source": "demo"}; !maps.Equal(res.Config.Task, want) {
		t.Errorf("config.task %v, want %v", res.Config.Task, want)
	}
	if res.Source == nil || *res.Source != "demo" || !strings.HasPrefix(res.TaskDir, filepath.Join(dir, "cache")) {
		t.Errorf("source %v, task_path %s", res.Source, res.TaskDir)
	}
	want := map[string]string{"name": "demo", "version": "1.0", "registry": reg, "git_url": repo, "git_commit_id": commit, "path": "tasks/hello"}
	if !maps.Equal(res.Dataset, want) {
		t.Errorf("dataset %v, want %v", res.Dataset, want)
	}
	var cfg struct {
		Datasets []map[string]string `json:"datasets"`
		Tasks    []any               `json:"tasks"`
	}
	json.Unmarshal(harbormodel.JobConfig.CheckFile(t, filepath.Join(job, "config.json")), &cfg)
	var jobRes struct {
		ID string `json:"id"`
	}
	json.Unmarshal(harbormodel.JobResult.CheckFile(t, filepath.Join(job, "result.json")), &jobRes)
	if len(cfg.Datasets) != 1 || !maps.Equal(cfg.Datasets[0], map[string]string{"name": "demo", "version": "1.0", "registry_path": reg}) || len(cfg.Tasks) != 0 {
		t.Errorf("the job's datasets %v, tasks %v", cfg.Datasets, cfg.Tasks)
	}
	if res.Config.JobID != jobRes.ID {
		t.Errorf("the trial's job_id %q, the job's id %q", res.Config.JobID, jobRes.ID)
	}
}
