package task

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTask makes a task folder from a task.toml and the usual parts.
func writeTask(t *testing.T, toml string, parts ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "my-task")
	files := map[string]string{"task.toml": toml}
	for _, p := range parts {
		files[p] = map[string]string{
			"instruction.md":                  "Do the thing.\n",
			"environment/Dockerfile":          "FROM busybox\n",
			"environment/docker-compose.yaml": "services:\n  main:\n    image: busybox\n",
			"tests/test.sh":                   "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n",
			"solution/solve.sh":               "#!/bin/sh\ntrue\n",
		}[p]
	}
	return writeFiles(t, dir, files)
}

// writeFiles writes files (path: content) under dir, and returns dir.
func writeFiles(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var allParts = []string{"instruction.md", "environment/Dockerfile", "tests/test.sh"}

func TestLoadTask(t *testing.T) {
	tk, err := Load(writeTask(t, `
version = "1.0"
[metadata]
author = "x"
tags = ["a"]
[agent]
timeout_sec = 90.5
[verifier]
timeout_sec = 30
env = {TOKEN_LIMIT = "3"}
[environment]
cpus = 2
memory_mb = 1024
network_mode = "public"
`, allParts...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Name != "my-task" || tk.AgentTimeout != 90500*time.Millisecond || tk.VerifierTimeout != 30*time.Second || tk.BuildTimeout != DefaultBuildTimeout ||
		tk.CPUs != 2 || tk.MemoryMB != 1024 || tk.AgentNetwork.Mode != Public || tk.VerifierEnv["TOKEN_LIMIT"] != "3" || tk.EnvDir == "" || !strings.HasPrefix(tk.Digest, "sha256:") ||
		tk.Instruction != "Do the thing.\n" {
		t.Errorf("task %+v", tk)
	}
	// The digest follows the content.
	dir := writeTask(t, "", allParts...)
	a, _ := Load(dir, Options{})
	os.WriteFile(filepath.Join(dir, "instruction.md"), []byte("Do another thing.\n"), 0o644)
	b, _ := Load(dir, Options{})
	if a.Digest == b.Digest {
		t.Error("the digest did not change with the instruction")
	}
}

func TestLoadTaskProblems(t *testing.T) {
	for _, c := range []struct {
		name, toml string
		parts      []string
		want       []string
		not        []string
	}{
		{name: "syntax: one error, nothing about the unread rest", toml: "[agent\ntimeout_sec = -5\n", parts: []string{"instruction.md", "tests/test.sh"},
			want: []string{"task.toml:1:", "the rest of the file was not read"}, not: []string{"timeout_sec", "no environment/Dockerfile"}},
		{name: "a table where a value goes", toml: "[environment]\nenv = 3\n", parts: allParts, want: []string{"task.toml:2:", "env has the wrong type"}},
		{name: "bad values", toml: "[agent]\ntimeout_sec = -1\n[environment]\ncpus = 0\nmemory_mb = 0\n", parts: allParts,
			want: []string{"task.toml:2: [agent] timeout_sec: must be a number of seconds above 0", "task.toml:4: [environment] cpus: must be above 0", "task.toml:5: [environment] memory_mb: must be above 0"}},
		{name: "loose types Harbor refuses too", toml: "[environment]\ncpus = \"many\"\nmemory_mb = 1.5\nmemory = 2048\nallow_internet = \"maybe\"\n[agent]\nuser = \"a:b\"\n", parts: allParts,
			want: []string{"cpus: must be a number", "memory_mb: must be a whole number, found 1.5", `memory: must be a string such as "2G"`, "allow_internet: must be true or false", "[agent] user: must be a user name or a uid"}},
		{name: "sizes", toml: "[environment]\nmemory = \"2GB\"\nstorage = \"4G\"\nstorage_mb = 1024\n", parts: allParts,
			want: []string{`"2GB" is not a size such as "2G"`, `"4G" is 4096 MiB but storage_mb says 1024: give one of them`}},
		{name: "network policies", toml: "[environment]\nallowed_hosts = [\"pypi.org\"]\n[agent]\nnetwork_mode = \"open\"\n[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"http://x.org\", \"*.ok.org\"]\n", parts: allParts,
			want: []string{"[environment] allowed_hosts: is only valid with network_mode = \"allowlist\"", `[agent] network_mode: "open" is not public, no-network or allowlist`,
				`"http://x.org": give a host name, without a scheme`},
			not: []string{`"*.ok.org"`}},
		{name: "an allowlist of nothing", toml: "[verifier]\nnetwork_mode = \"allowlist\"\n", parts: allParts, want: []string{"[verifier] network_mode: \"allowlist\" needs allowed_hosts"}},
		{name: "what troupe cannot run yet", toml: "[environment]\ngpus = 1\nos = \"windows\"\n[verifier]\nenvironment_mode = \"separate\"\n[[steps]]\nname = \"one\"\n", parts: allParts,
			want: []string{"gpus: 1: troupe does not give trials GPUs", `os: "windows": troupe runs Linux containers only`, "a separate verifier environment is not supported yet", `missing: [[steps]] names "one"`}},
		{name: "task name", toml: "[task]\nname = \"Parallel TF-IDF Search\"\n", parts: allParts, want: []string{"[task] name: \"Parallel TF-IDF Search\" must be in org/name form"}},
		{name: "troupe's services key", toml: "[metadata.troupe]\nservices = \"forever\"\n", parts: allParts, want: []string{"task.toml:2: [metadata.troupe] services: \"forever\" is not \"keep\""}},
		{name: "healthcheck and MCP", toml: "[environment.healthcheck]\ninterval_sec = -1\nretries = 0\n[[environment.mcp_servers]]\nname = \"m\"\ntransport = \"stdio\"\n", parts: allParts,
			want: []string{"[environment.healthcheck] command: is required", "interval_sec: must be between 0 and a day", "retries: must be between 1 and 1000", "MCP server \"m\": transport stdio needs a command"}},
		{name: "env from a host variable that is not set", toml: "[environment.env]\nTOKEN = \"${TROUPE_TEST_UNSET_VAR}\"\n", parts: allParts,
			want: []string{"TOKEN takes ${TROUPE_TEST_UNSET_VAR} from the host, which does not set it"}},
		{name: "artifacts", toml: "artifacts = [\"relative/path\", {source = \"/out\", destination = \"../up\"}, 3]\n", parts: allParts,
			want: []string{`source "relative/path" must be an absolute path`, `destination "../up" must be a relative path inside artifacts/`, "entry 3 must be a path or a table"}},
		{name: "missing parts", toml: "", want: []string{"instruction.md: open", "no environment/Dockerfile, docker-compose.yaml or [environment] docker_image", "tests/test.sh is missing"}},
		{name: "empty instruction", toml: "", parts: []string{"environment/Dockerfile", "tests/test.sh"}, want: []string{"instruction.md: open"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeTask(t, c.toml, c.parts...), Options{})
			checkSays(t, err, c.want, c.not)
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "nothing"), Options{}); err == nil || !strings.Contains(err.Error(), "a Harbor task folder holds task.toml") {
		t.Errorf("no folder: %v", err)
	}
}

// checkSays fails the test unless err says each of want and none of not.
func checkSays(t *testing.T, err error, want, not []string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q:\n%v", w, err)
		}
	}
	for _, w := range not {
		if strings.Contains(err.Error(), w) {
			t.Errorf("error says %q:\n%v", w, err)
		}
	}
}

func TestFindTasks(t *testing.T) {
	one := writeTask(t, "", allParts...)
	dataset := filepath.Dir(one)
	tasks, err := Find([]string{dataset}, Options{})
	if err != nil || len(tasks) != 1 || tasks[0].Name != "my-task" {
		t.Fatalf("%v %v", tasks, err)
	}
	if _, err := Find([]string{one, dataset}, Options{}); err == nil || !strings.Contains(err.Error(), "two tasks are named my-task") {
		t.Errorf("duplicate names: %v", err)
	}
	if _, err := Find([]string{t.TempDir()}, Options{}); err == nil || !strings.Contains(err.Error(), "neither a task") {
		t.Errorf("empty folder: %v", err)
	}
}

// FuzzLoad: any task.toml is a task or an error, never a panic.
func FuzzLoadTask(f *testing.F) {
	for _, s := range []string{"", "[agent]\ntimeout_sec = 3\n", "[environment]\ncpus = 1.5\nmemory_mb = 1\n", "x = [1, {a = 2}]\n[[steps]]\n", "[verifier]\nenv = {a = \"b\"}\n"} {
		f.Add(s)
	}
	dir := f.TempDir()
	for _, p := range []string{"instruction.md", "environment/Dockerfile", "tests/test.sh"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte("x\n"), 0o644)
	}
	f.Fuzz(func(t *testing.T, toml string) {
		if err := os.WriteFile(filepath.Join(dir, "task.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		tk, err := Load(dir, Options{})
		if errors.Is(err, errDecoderPanic) {
			t.Fatal(err)
		}
		if err == nil && (tk.AgentTimeout <= 0 || tk.VerifierTimeout <= 0 || tk.CPUs < 0) {
			t.Fatalf("accepted %+v", tk)
		}
	})
}

// TestHarborKeys: every key of Harbor's schema loads, with Harbor's
// meaning and its loose types.
func TestHarborKeys(t *testing.T) {
	getenv := func(k string) string { return map[string]string{"HOST_REGION": "eu-1"}[k] }
	tk, err := Load(writeTask(t, `
schema_version = "1.3"
source = "terminal-bench"
artifacts = ["/app/out.log", {source = "/app/results", destination = "results", exclude = ["*.tmp"]}]

[task]
name = "harbor/hello-user"
description = "x"

[metadata]
anything = {nested = [1, 2]}

[agent]
timeout_sec = 600
user = "agent"
network_mode = "allowlist"
allowed_hosts = ["pypi.org", "*.files.example"]

[verifier]
timeout_sec = "120"
user = 1000.0
env = {A = "b", REGION = "${HOST_REGION}", MODE = "${UNSET_MODE:-fast}"}

[environment]
docker_image = "alexgshaw/task:20251031"
cpus = "2"
memory = "1.5G"
storage = " 10g "
gpus = 0
gpu_types = ["H100"]
allow_internet = "false"
skills_dir = "/skills"
workdir = "/work"
mcp_servers = [{name = "files", transport = "http", url = "http://mcp:8000/mcp"}]

[environment.env]
PLAIN = "1"

[environment.healthcheck]
command = "curl -sf http://localhost:8080/"
interval_sec = 2
retries = 2

[solution.env]
X = "y"
`, allParts...), Options{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"schema", tk.SchemaVersion, "1.3"},
		{"source", tk.Source, "terminal-bench"},
		{"id", tk.ID, "harbor/hello-user"},
		{"agent timeout", tk.AgentTimeout, 600 * time.Second},
		{"verifier timeout", tk.VerifierTimeout, 120 * time.Second},
		{"agent user", tk.AgentUser, "agent"},
		{"verifier user", tk.VerifierUser, "1000"},
		{"verifier env", fmt.Sprint(tk.VerifierEnv), "map[A:b MODE:fast REGION:eu-1]"},
		{"image", tk.Image, "alexgshaw/task:20251031"},
		{"cpus", tk.CPUs, 2.0},
		{"memory", tk.MemoryMB, int64(1536)},
		{"storage", tk.StorageMB, int64(10240)},
		{"agent network", fmt.Sprint(tk.AgentNetwork), "{allowlist [pypi.org *.files.example]}"},
		{"verifier network", fmt.Sprint(tk.VerifierNetwork), "{no-network []}"},
		{"gpu types", fmt.Sprint(tk.GPUTypes), "[H100]"},
		{"skills", tk.SkillsDir, "/skills"},
		{"workdir", tk.Workdir, "/work"},
		{"env", fmt.Sprint(tk.Env), "map[PLAIN:1]"},
		{"mcp", fmt.Sprintf("%+v", tk.MCPServers), "[{Name:files Transport:streamable-http URL:http://mcp:8000/mcp Command: Args:[]}]"},
		{"healthcheck", fmt.Sprintf("%+v", *tk.Healthcheck), "{Command:curl -sf http://localhost:8080/ Interval:2s Timeout:30s StartPeriod:0s StartInterval:5s Retries:2}"},
		{"artifacts", fmt.Sprintf("%+v", tk.Artifacts), "[{Source:/app/out.log Destination: Exclude:[]} {Source:/app/results Destination:results Exclude:[*.tmp]}]"},
		{"warnings", len(tk.Warnings), 0},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
}

// TestNetworkAsHarborMeansIt: the older allow_internet and the newer
// network_mode, per phase, and Harbor's default (the internet) when a task
// says nothing.
func TestNetworkAsHarborMeansIt(t *testing.T) {
	pub, none := Network{Mode: Public}, Network{Mode: NoNetwork}
	list := func(h ...string) Network { return Network{Mode: Allowlist, AllowedHosts: h} }
	for _, c := range []struct {
		toml             string
		agents, verifier Network
	}{
		{"", pub, pub},
		{"[environment]\nallow_internet = true\n", pub, pub},
		{"[environment]\nallow_internet = false\n", none, none},
		{"[environment]\nnetwork_mode = \"public\"\n", pub, pub},
		{"[environment]\nnetwork_mode = \"no-network\"\n", none, none},
		// An explicit mode wins over the older switch, as in Harbor.
		{"[environment]\nnetwork_mode = \"public\"\nallow_internet = false\n", pub, pub},
		// Each phase may have its own.
		{"[environment]\nnetwork_mode = \"no-network\"\n[verifier]\nnetwork_mode = \"public\"\n", none, pub},
		{"[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"PyPI.org.\", \"*.example.com\"]\n", list("pypi.org", "*.example.com"), pub},
		{"[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n[verifier]\nnetwork_mode = \"no-network\"\n", list("a.org"), none},
	} {
		tk, err := Load(writeTask(t, c.toml, allParts...), Options{})
		if err != nil {
			t.Errorf("%q: %v", c.toml, err)
			continue
		}
		if fmt.Sprint(tk.AgentNetwork, tk.VerifierNetwork) != fmt.Sprint(c.agents, c.verifier) {
			t.Errorf("%q: agents %v, verifier %v; want %v, %v", c.toml, tk.AgentNetwork, tk.VerifierNetwork, c.agents, c.verifier)
		}
	}
}

// TestSolutionEnv: [solution] env is resolved only when the oracle runs,
// as in Harbor: a task loads without the host variable it names; the
// oracle then needs it, or its default.
func TestSolutionEnv(t *testing.T) {
	toml := "[solution.env]\nTOKEN = \"${SOL_TOKEN}\"\nMODE = \"${SOL_MODE:-fast}\"\nPLAIN = \"x\"\n"
	tk, err := Load(writeTask(t, toml, append(allParts, "solution/solve.sh")...), Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(tk.SolutionDir) != "solution" {
		t.Errorf("solution dir %q", tk.SolutionDir)
	}
	if _, _, err := tk.SolutionEnv(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "[solution] env: TOKEN takes ${SOL_TOKEN} from the host, which does not set it") {
		t.Errorf("without SOL_TOKEN: %v", err)
	}
	env, fromHost, err := tk.SolutionEnv(func(k string) string { return map[string]string{"SOL_TOKEN": "t0k"}[k] })
	if err != nil || fmt.Sprint(env) != "map[MODE:fast PLAIN:x TOKEN:t0k]" || len(fromHost) != 1 || fromHost["SOL_TOKEN"].Reveal() != "t0k" || len(tk.FromHost) != 0 {
		t.Errorf("env %v, from host %v, task's %v, %v", env, fromHost, tk.FromHost, err)
	}
	if tk, err := Load(writeTask(t, "", allParts...), Options{}); err != nil || tk.SolutionDir != "" {
		t.Errorf("without solution/: %q %v", tk.SolutionDir, err)
	}
}

// TestUnknownKeysWarn: Harbor ignores keys it does not define; troupe says
// so, with the line and a suggestion, and refuses them only when strict.
func TestUnknownKeysWarn(t *testing.T) {
	toml := "version = \"1.0\"\n[agent]\ntimeout_secs = 3\nreasoning_effort = \"high\"\n[agnet]\nx = 1\n[environment]\nimage = \"x\"\n[environment.healthcheck]\ncommand = \"true\"\nretires = 2\n"
	dir := writeTask(t, toml, allParts...)
	tk, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(tk.Warnings, "\n")
	for _, want := range []string{
		`task.toml:3:1: unknown key "agent.timeout_secs", ignored (Harbor ignores it too); did you mean "timeout_sec"?`,
		`task.toml:4:1: unknown key "agent.reasoning_effort"`,
		`unknown key "agnet"`, `did you mean "agent"?`,
		`task.toml:8:1: unknown key "environment.image"`,
		`task.toml:11: [environment.healthcheck] retires: unknown key, ignored (Harbor ignores it too); did you mean "retries"?`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings do not say %q:\n%s", want, joined)
		}
	}
	if _, err := Load(dir, Options{Strict: true}); err == nil || !strings.Contains(err.Error(), "(refused: --strict)") {
		t.Errorf("strict: %v", err)
	}
}

// TestTroupeServices: [metadata.troupe] services, troupe's own key where
// Harbor keeps metadata, says whether a task needs what its agents leave
// running; without it, nothing is declared.
func TestTroupeServices(t *testing.T) {
	for toml, want := range map[string]string{
		"":                                 "",
		"[metadata]\ncategory = \"web\"\n": "",
		"[metadata.troupe]\nservices = \"keep\"\n":  ServicesKeep,
		"[metadata.troupe]\nservices = \"sweep\"\n": ServicesSweep,
	} {
		tk, err := Load(writeTask(t, toml, allParts...), Options{Strict: true})
		if err != nil {
			t.Errorf("%q: %v", toml, err)
		} else if tk.Services != want {
			t.Errorf("%q: services %q, want %q", toml, tk.Services, want)
		}
	}
}
