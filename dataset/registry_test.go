package dataset

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/troupebench/troupe/internal/located"
)

// harborSample is the shape of Harbor's registry.json (0.13.1): indent 2,
// a list of datasets, each task pinned to a commit, metrics beside.
const harborSample = `[
  {
    "name": "hello-world",
    "version": "1.0",
    "description": "A simple example task.",
    "tasks": [
      {
        "name": "hello-world",
        "git_url": "https://github.com/laude-institute/harbor.git",
        "git_commit_id": "0d0a36e0fbd2a4b2d1b0b5f1b2d1e1d0c0b0a090",
        "path": "examples/tasks/hello-world"
      }
    ]
  },
  {
    "name": "terminal-bench",
    "version": "2.0",
    "description": "Terminal-Bench 2.0",
    "metrics": [{"type": "mean"}],
    "tasks": [
      {
        "name": "adaptive-rejection-sampler",
        "git_url": "https://github.com/laude-institute/terminal-bench-2.git",
        "git_commit_id": "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c",
        "path": "adaptive-rejection-sampler"
      },
      {
        "name": "bn-fit-modify",
        "git_url": "https://github.com/laude-institute/terminal-bench-2.git",
        "git_commit_id": "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c",
        "path": "bn-fit-modify"
      }
    ]
  },
  {"name": "terminal-bench", "version": "head", "description": "", "tasks": []},
  {"name": "terminal-bench", "version": "1.10", "description": "", "tasks": []},
  {"name": "terminal-bench", "version": "1.9", "description": "", "tasks": []},
  {"name": "swebench-verified", "version": "1.0", "description": "", "tasks": []},
  {"name": "swebench-verified", "version": "parity", "description": "", "tasks": []},
  {"name": "swebench-verified", "version": "2.0", "description": "", "tasks": []},
  {"name": "aider-polyglot", "version": "1.0", "description": "", "tasks": []}
]
`

func TestParseHarborFormat(t *testing.T) {
	reg, err := Parse("registry.json", []byte(harborSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.Datasets) != 9 {
		t.Fatalf("want 9 datasets, got %d", len(reg.Datasets))
	}
	tb := reg.Datasets[1]
	if tb.Ref() != "terminal-bench@2.0" || tb.Description != "Terminal-Bench 2.0" || len(tb.Tasks) != 2 {
		t.Fatalf("got %+v", tb)
	}
	want := TaskRef{Name: "bn-fit-modify", GitURL: "https://github.com/laude-institute/terminal-bench-2.git", GitCommit: "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c", Path: "bn-fit-modify"}
	if tb.Tasks[1] != want {
		t.Errorf("task: got %+v, want %+v", tb.Tasks[1], want)
	}
}

func TestParseProblems(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		// want are the messages, each with its line:col.
		want []string
	}{
		{"not JSON", "[\n  {\"name\": \"a\",}\n]", []string{"r.json:2:"}},
		{"not a list", `{"name": "a"}`, []string{"r.json:1:1: the registry must be a JSON list of datasets"}},
		{"dataset not an object", "[\n  \"a\"\n]", []string{"r.json:2:3: a dataset must be an object"}},
		{"no name", "[\n  {\"version\": \"1\", \"tasks\": []}\n]", []string{"r.json:2:3: a dataset has no name"}},
		{"no version", `[{"name": "a", "tasks": []}]`, []string{"r.json:1:2: dataset a has no version"}},
		{"version a number", "[{\"name\": \"a\",\n  \"version\": 2.0, \"tasks\": []}]", []string{"r.json:2:14: version must be a string, found the number 2.0"}},
		{"@ in name", `[{"name": "a@b", "version": "1", "tasks": []}]`, []string{"cannot hold @"}},
		{"no tasks", `[{"name": "a", "version": "1"}]`, []string{"r.json:1:2: dataset a@1: no tasks list"}},
		{"tasks not a list", `[{"name": "a", "version": "1", "tasks": {}}]`, []string{"r.json:1:41: dataset a@1: tasks must be a list"}},
		{"task without path", "[{\"name\": \"a\", \"version\": \"1\", \"tasks\": [\n  {\"name\": \"t\"}]}]", []string{"r.json:2:3: dataset a@1: task 1: no path"}},
		{"task field of a wrong type", `[{"name": "a", "version": "1", "tasks": [{"name": "t", "path": "p", "git_commit_id": 5}]}]`, []string{"dataset a@1: task 1: git_commit_id must be a string, found the number 5"}},
		{"twice", `[{"name": "a", "version": "1", "tasks": []}, {"name": "a", "version": "1", "tasks": []}]`, []string{"r.json:1:46: a@1 is listed twice"}},
		{"every problem", `[{"version": "1", "tasks": []}, {"name": "b", "tasks": []}]`, []string{"a dataset has no name", "dataset b has no version"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := Parse("r.json", []byte(tc.doc))
			if err == nil {
				t.Fatalf("parsed: %+v", reg)
			}
			if _, ok := errors.AsType[*located.Error](err); !ok {
				t.Errorf("want a *located.Error, got %T", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("want %q in:\n%v", w, err)
				}
			}
		})
	}
}

func TestParseIgnoresWhatHarborIgnores(t *testing.T) {
	doc := `[{"name": "a", "version": "1", "description": null, "metrics": [{"type": "x"}], "extra": {"k": [1]},
	  "tasks": [{"name": "t", "path": "p", "git_url": null, "git_commit_id": null, "notes": "x"}]}]`
	reg, err := Parse("r.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Datasets[0].Tasks[0]; got != (TaskRef{Name: "t", Path: "p"}) {
		t.Errorf("got %+v", got)
	}
}

func TestLookup(t *testing.T) {
	reg, err := Parse("registry.json", []byte(harborSample))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref, want string
		// wantErr is in the error; close and versions are the
		// *NotFoundError's fields.
		wantErr  string
		close    []string
		versions []string
	}{
		{ref: "terminal-bench@2.0", want: "terminal-bench@2.0"},
		{ref: "terminal-bench", want: "terminal-bench@head"},
		{ref: "swebench-verified", want: "swebench-verified@2.0"},
		{ref: "hello-world", want: "hello-world@1.0"},
		{ref: "terminal-bench@3.0", wantErr: `dataset terminal-bench has no version "3.0" in registry.json; it has 1.9, 1.10, 2.0, head`, versions: []string{"1.9", "1.10", "2.0", "head"}},
		{ref: "terminal-bnech@2.0", wantErr: `no dataset is named "terminal-bnech" in registry.json; did you mean terminal-bench?`, close: []string{"terminal-bench"}},
		{ref: "swebench@1.0", wantErr: "did you mean swebench-verified?", close: []string{"swebench-verified"}},
		{ref: "zzz@1", wantErr: `no dataset is named "zzz" in registry.json; troupe datasets list shows the datasets it has`},
		{ref: "@1.0", wantErr: "give a dataset as NAME@VERSION"},
		{ref: "terminal-bench@", wantErr: "no version after @"},
		{ref: "", wantErr: "give a dataset as NAME@VERSION"},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			d, err := reg.Lookup(tc.ref)
			if tc.wantErr == "" {
				if err != nil || d.Ref() != tc.want {
					t.Fatalf("got %v, %v; want %s", d, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
			nf, ok := errors.AsType[*NotFoundError](err)
			if !ok {
				if tc.close != nil || tc.versions != nil {
					t.Fatalf("want a *NotFoundError, got %T", err)
				}
				return
			}
			if !errors.Is(err, ErrNotFound) {
				t.Error("errors.Is(err, ErrNotFound) is false")
			}
			if !slices.Equal(nf.Close, tc.close) || !slices.Equal(nf.Versions, tc.versions) {
				t.Errorf("close %q versions %q; want %q and %q", nf.Close, nf.Versions, tc.close, tc.versions)
			}
		})
	}
}

func TestCompareVersions(t *testing.T) {
	got := []string{"head", "2.0", "parity", "1.10", "1.9", "v1.2", "1.0.0", "1.0", "alpha"}
	slices.SortFunc(got, CompareVersions)
	want := []string{"alpha", "parity", "1.0", "1.0.0", "v1.2", "1.9", "1.10", "2.0", "head"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLoadFromFileAndURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(path, []byte(harborSample), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/registry.json" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(harborSample))
	}))
	defer srv.Close()
	for _, src := range []string{path, "file://" + path, srv.URL + "/registry.json"} {
		reg, err := Load(t.Context(), src, srv.Client())
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if reg.Source != src || len(reg.Datasets) != 9 {
			t.Errorf("%s: source %s, %d datasets", src, reg.Source, len(reg.Datasets))
		}
	}
	for src, want := range map[string]string{
		srv.URL + "/missing.json":                   "404 Not Found",
		filepath.Join(t.TempDir(), "none.json"):     "no such file",
		"file://" + filepath.Join(t.TempDir(), "x"): "no such file",
	} {
		if _, err := Load(t.Context(), src, srv.Client()); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), src) {
			t.Errorf("%s: got %v, want %q and the source", src, err, want)
		}
	}
}

// FuzzRegistry checks that Parse never panics, that what it accepts is
// well formed, and that it reads back what it accepted, written again.
func FuzzRegistry(f *testing.F) {
	f.Add([]byte(harborSample))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"name": "a", "version": "1", "tasks": [{"name": "t", "path": "p", "git_url": null}]}]`))
	f.Add([]byte(`[{"name": "a", "version": 1, "tasks": {}}, "x", null, {"name": "a@b"}]`))
	f.Add([]byte("[\n{\"name\":\"\\u00e9\", \"version\":\"1\", \"tasks\":[{\"name\":\"t\",\"path\":\"p\"}], \"name\":\"b\"}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		reg, err := Parse("fuzz.json", data)
		if err != nil {
			for _, e := range unwrapAll(err) {
				if ve, ok := e.(*located.Error); ok && (ve.Line < 1 || ve.Col < 1) {
					t.Fatalf("bad position in %v", ve)
				}
			}
			return
		}
		type task struct {
			Name      string `json:"name"`
			GitURL    string `json:"git_url"`
			GitCommit string `json:"git_commit_id"`
			Path      string `json:"path"`
		}
		type ds struct {
			Name        string `json:"name"`
			Version     string `json:"version"`
			Description string `json:"description"`
			Tasks       []task `json:"tasks"`
		}
		out := []ds{}
		seen := map[string]bool{}
		for _, d := range reg.Datasets {
			if d.Name == "" || d.Version == "" || strings.Contains(d.Name, "@") || seen[d.Ref()] {
				t.Fatalf("accepted %+v", d)
			}
			seen[d.Ref()] = true
			got, err := reg.Lookup(d.Ref())
			if err != nil || got != d {
				t.Fatalf("Lookup(%s): %v, %v", d.Ref(), got, err)
			}
			e := ds{Name: d.Name, Version: d.Version, Description: d.Description, Tasks: []task{}}
			for _, tr := range d.Tasks {
				if tr.Name == "" || tr.Path == "" {
					t.Fatalf("accepted task %+v", tr)
				}
				e.Tasks = append(e.Tasks, task(tr))
			}
			out = append(out, e)
		}
		again, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		reg2, err := Parse("again.json", again)
		if err != nil {
			t.Fatalf("%s: %v", again, err)
		}
		if len(reg2.Datasets) != len(reg.Datasets) {
			t.Fatalf("%d datasets, then %d", len(reg.Datasets), len(reg2.Datasets))
		}
		for i := range reg.Datasets {
			if !reflect.DeepEqual(reg.Datasets[i], reg2.Datasets[i]) {
				t.Fatalf("%+v read back as %+v", reg.Datasets[i], reg2.Datasets[i])
			}
		}
	})
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
