package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// troupe runs one command line in process, isolated from the caller's
// configuration, and returns its exit code and output.
func troupe(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// goEnv is where the go command keeps its caches, read once.
var goEnv = sync.OnceValue(func() map[string]string {
	env := map[string]string{}
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		return env
	}
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		env[[]string{"GOCACHE", "GOMODCACHE", "GOPATH"}[i]] = line
	}
	return env
})

// isolate points every config lookup at an empty place and runs the test in
// a fresh folder, so a developer's own troupe.yaml cannot leak in.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// Go's own caches stay where they are: a build of troupe (troupe run and
	// doctor make a static one when the test binary is not) must not start
	// from an empty cache.
	for k, v := range goEnv() {
		t.Setenv(k, v)
	}
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	t.Setenv("HOME", filepath.Join(dir, "home"))
	for _, k := range []string{"TROUPE_CONFIG", "TROUPE_ARTIFACT_ROOT"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Chdir(dir)
	return dir
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// repoPath is a path in the repository, from this package's folder.
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func manifestDoc(promptPath, digest, endpoint string) string {
	return `condition: t
roster:
  - id: solo
    kind: orchestrator
    role: solo
    count: 1
    endpoint: ` + endpoint + `
    model_revision: r
    prompt:
      path: ` + promptPath + `   # keep me
      sha256: ` + digest + `
prices:
  ` + endpoint + `: {input_per_million_usd: 0, cached_input_per_million_usd: 0, output_per_million_usd: 0}
trial_budget: {timeout_seconds: 60}
`
}

func TestValidateExamples(t *testing.T) {
	examples, _ := filepath.Glob(repoPath(t, "examples/manifests/*.yaml"))
	isolate(t)
	if len(examples) != 3 {
		t.Fatalf("want 3 example manifests, found %v", examples)
	}
	code, out, errOut := troupe(t, append([]string{"validate"}, examples...)...)
	if code != exitOK || !strings.Contains(out, "3 manifests: 3 valid, 0 invalid") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "warning") {
		t.Errorf("examples use mock/ endpoints, which need no configuration:\n%s", out)
	}
}

func TestValidateFiveMistakes(t *testing.T) {
	dir := isolate(t)
	doc := strings.NewReplacer(
		"condition: t", "condition: t\nschema_version: 1",
		"kind: orchestrator", "kind: boss",
		"count: 1", "count: 0",
		"model_revision: r", "model_revison: r",
		"timeout_seconds: 60", "timeout_seconds: -5",
	).Replace(manifestDoc("p.md", sum("p"), "e"))
	write(t, filepath.Join(dir, "bad.yaml"), doc)

	code, out, _ := troupe(t, "validate", "bad.yaml")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d", code, exitFailed)
	}
	located := regexp.MustCompile(`(?m)^  bad\.yaml:\d+:\d+: \S+: .+$`).FindAllString(out, -1)
	if len(located) != 5 || !strings.Contains(out, "FAIL  bad.yaml  5 problems") {
		t.Fatalf("want five located errors, got %d:\n%s", len(located), out)
	}
	for _, want := range []string{
		`bad.yaml:2:17: schema_version: must be the string "1"`,
		`bad.yaml:5:11: roster[0].kind: must be one of orchestrator, worker; found "boss"`,
		`bad.yaml:7:12: roster[0].count: must be greater than 0, found 0`,
		`bad.yaml:9:5: roster[0].model_revison: unknown key "model_revison"; did you mean "model_revision"?`,
		`bad.yaml:15:33: trial_budget.timeout_seconds: must be greater than 0, found -5`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	dir := isolate(t)
	write(t, filepath.Join(dir, "p.md"), "p")
	write(t, filepath.Join(dir, "good.yaml"), manifestDoc("p.md", sum("p"), "gpt-x"))
	write(t, filepath.Join(dir, "stale.yaml"), manifestDoc("p.md", sum("old"), "e"))

	code, out, _ := troupe(t, "validate", "--json", "good.yaml", "stale.yaml")
	if code != exitFailed {
		t.Fatalf("exit %d", code)
	}
	var res struct {
		Valid     bool
		Manifests []validateResult
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if res.Valid || len(res.Manifests) != 2 {
		t.Fatalf("unexpected %+v", res)
	}
	good, stale := res.Manifests[0], res.Manifests[1]
	if !good.Valid || len(good.Hash) != 64 || good.Agents != 1 || len(good.Warnings) != 1 || !strings.Contains(good.Warnings[0].Message, `endpoint "gpt-x" is not configured`) {
		t.Errorf("good manifest: %+v", good)
	}
	if stale.Valid || len(stale.Errors) != 1 {
		t.Fatalf("stale manifest: %+v", stale)
	}
	e := stale.Errors[0]
	if e.Line != 11 || e.Col != 15 || e.Path != "roster[0].prompt.sha256" || !strings.Contains(e.Message, "the file has "+sum("p")) {
		t.Errorf("stale pin error: %+v", e)
	}
}

func TestHash(t *testing.T) {
	golden := repoPath(t, "manifest/testdata/hash/tb-team-opus-luna.yaml")
	other := repoPath(t, "manifest/testdata/hash/m1-hello-world.yaml")
	isolate(t)
	const want = "bb819cba47db47970686599cd0afb84f354933c7d8542f94af8d04c640caf1a0"

	if code, out, _ := troupe(t, "hash", golden); code != exitOK || out != want+"\n" {
		t.Errorf("hash: exit %d, %q", code, out)
	}
	code, out, _ := troupe(t, "hash", golden, other)
	if code != exitOK || !strings.HasPrefix(out, want+"  "+golden+"\n") || strings.Count(out, "\n") != 2 {
		t.Errorf("hash of two: exit %d, %q", code, out)
	}
	code, out, _ = troupe(t, "hash", "--canonical", golden)
	canonical, _ := os.ReadFile(strings.TrimSuffix(golden, ".yaml") + ".canonical.json")
	if code != exitOK || out != string(canonical)+"\n" {
		t.Errorf("--canonical: exit %d, %q", code, out)
	}
	if code, _, errOut := troupe(t, "hash", "missing.yaml"); code != exitFailed || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
}

func TestPin(t *testing.T) {
	dir := isolate(t)
	write(t, filepath.Join(dir, "personas", "p.md"), "prompt v1")
	path := filepath.Join(dir, "m.yaml")
	write(t, path, manifestDoc("personas/p.md", sum("prompt v0"), "e"))
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}

	code, out, _ := troupe(t, "pin", "--check", "m.yaml")
	if code != exitFailed || !strings.Contains(out, "stale  m.yaml:11:15: roster[0].prompt (personas/p.md): "+sum("prompt v0")+" -> "+sum("prompt v1")) {
		t.Fatalf("--check: exit %d\n%s", code, out)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), sum("prompt v0")) {
		t.Fatal("--check wrote the file")
	}

	if code, out, _ = troupe(t, "pin", "m.yaml"); code != exitOK || !strings.HasPrefix(out, "updated  m.yaml") {
		t.Fatalf("pin: exit %d\n%s", code, out)
	}
	data, _ := os.ReadFile(path)
	if want := manifestDoc("personas/p.md", sum("prompt v1"), "e"); string(data) != want {
		t.Errorf("pinned file:\n%s\nwant:\n%s", data, want)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o640 {
		t.Errorf("mode changed to %v", info.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if code, out, _ = troupe(t, "pin", "--check", "m.yaml"); code != exitOK || !strings.Contains(out, "every pin is current") {
		t.Errorf("after pin, --check: exit %d\n%s", code, out)
	}
	if code, _, _ = troupe(t, "validate", "m.yaml"); code != exitOK {
		t.Errorf("pinned manifest does not validate")
	}
}

func TestPinMissingFile(t *testing.T) {
	dir := isolate(t)
	write(t, filepath.Join(dir, "m.yaml"), manifestDoc("nope.md", "TODO", "e"))
	code, out, _ := troupe(t, "pin", "m.yaml")
	if code != exitFailed || !strings.Contains(out, "m.yaml:10:13: roster[0].prompt.path: nope.md does not exist") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

func TestArtifactRootPrecedence(t *testing.T) {
	dir := isolate(t)
	for _, d := range []string{"from-file", "from-env", "from-flag"} {
		write(t, filepath.Join(dir, d, "p.md"), d)
	}
	write(t, filepath.Join(dir, "conf", "troupe.yaml"), "artifact_root: ../from-file\n")
	write(t, filepath.Join(dir, "m.yaml"), manifestDoc("p.md", sum("from-flag"), "mock/x"))

	validate := func(args ...string) (int, string) {
		code, out, _ := troupe(t, append([]string{"validate", "--config", "conf/troupe.yaml"}, append(args, "m.yaml")...)...)
		return code, out
	}
	if code, out := validate("--artifact-root", "from-flag"); code != exitOK {
		t.Errorf("the flag must win: %s", out)
	}
	t.Setenv("TROUPE_ARTIFACT_ROOT", "from-env")
	if code, out := validate(); code != exitFailed || !strings.Contains(out, "the file has "+sum("from-env")) {
		t.Errorf("the environment must win over the file: %s", out)
	}
	if code, out := validate("--artifact-root", "from-flag"); code != exitOK {
		t.Errorf("the flag must win over the environment: %s", out)
	}
	os.Unsetenv("TROUPE_ARTIFACT_ROOT")
	if code, out := validate(); code != exitFailed || !strings.Contains(out, "the file has "+sum("from-file")) {
		t.Errorf("the config file's artifact_root, relative to the file, must apply: %s", out)
	}
}

func TestConfigFile(t *testing.T) {
	dir := isolate(t)
	write(t, filepath.Join(dir, "p.md"), "p")
	write(t, filepath.Join(dir, "m.yaml"), manifestDoc("p.md", sum("p"), "gpt-x"))

	// ./troupe.yaml is found without being named, and its endpoints are used.
	write(t, filepath.Join(dir, "troupe.yaml"), "endpoints:\n  gpt-x: {api: openai, base_url: 'http://127.0.0.1:9/v1', api_key_env: OPENAI_API_KEY}\n")
	if code, out, _ := troupe(t, "validate", "m.yaml"); code != exitOK || strings.Contains(out, "warning") {
		t.Errorf("configured endpoint: exit %d\n%s", code, out)
	}
	// A broken config file is reported, located, by the commands that read it.
	write(t, filepath.Join(dir, "troupe.yaml"), "endpoints:\n  gpt-x: {api: openai}\nartifact_rot: x\n")
	code, _, errOut := troupe(t, "validate", "m.yaml")
	if code != exitFailed || !strings.Contains(errOut, "troupe.yaml:2:10: endpoints[\"gpt-x\"]: an openai endpoint needs base_url") ||
		!strings.Contains(errOut, `troupe.yaml:3:1: artifact_rot: unknown key "artifact_rot"; did you mean "artifact_root"?`) {
		t.Errorf("broken config: exit %d\n%s", code, errOut)
	}
	// ... but not by commands that need no configuration.
	if code, _, _ := troupe(t, "hash", "m.yaml"); code != exitOK {
		t.Errorf("hash must not read the config file")
	}
	// A config file named explicitly must exist.
	if code, _, errOut := troupe(t, "validate", "--config", "nope.yaml", "m.yaml"); code != exitFailed || !strings.Contains(errOut, "config file nope.yaml does not exist") {
		t.Errorf("missing --config: exit %d %s", code, errOut)
	}
	// $XDG_CONFIG_HOME/troupe/config.yaml is the fallback.
	os.Remove(filepath.Join(dir, "troupe.yaml"))
	write(t, filepath.Join(dir, "xdg", "troupe", "config.yaml"), "endpoints: {gpt-x: {api: mock}}\n")
	if code, out, _ := troupe(t, "validate", "m.yaml"); code != exitOK || strings.Contains(out, "warning") {
		t.Errorf("XDG config: exit %d\n%s", code, out)
	}
}

func TestPersonasAndVersion(t *testing.T) {
	isolate(t)
	code, out, _ := troupe(t, "personas", "list")
	if code != exitOK || !strings.Contains(out, `lead    Lead`) || !strings.Contains(out, `{path: "troupe:worker", sha256: `) {
		t.Errorf("list: %d\n%s", code, out)
	}
	code, out, _ = troupe(t, "personas", "show", "solo")
	if code != exitOK || !strings.HasPrefix(out, "# Solo") {
		t.Errorf("show: %d %q", code, out)
	}
	code, _, errOut := troupe(t, "personas", "show", "boss")
	if code != exitFailed || !strings.Contains(errOut, `unknown persona "boss"; the built-in personas are critic, lead, peer, solo, worker`) {
		t.Errorf("show unknown: %d %q", code, errOut)
	}
	code, out, _ = troupe(t, "version")
	if code != exitOK || !regexp.MustCompile(`^troupe \S+ \(.+, go1\.\d+.*, \w+/\w+\)\n$`).MatchString(out) {
		t.Errorf("version: %d %q", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	isolate(t)
	for _, args := range [][]string{
		{"validate"},
		{"hash"},
		{"hash", "--canonical", "--file", "x.yaml"},
		{"stacks", "pin"},
		{"validate", "--frobnicate", "x.yaml"},
		{"frobnicate"},
		{"personas", "show"},
		{"version", "extra"},
	} {
		code, _, errOut := troupe(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "--help' for usage") {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
	}
	if code, out, _ := troupe(t, "validate", "--help"); code != exitOK || !strings.Contains(out, "Exit status: 0 when every manifest is valid") {
		t.Errorf("--help: %d %q", code, out)
	}
}

func TestExampleTaskLayout(t *testing.T) {
	task := repoPath(t, "examples/tasks/hello-world")
	for _, f := range []string{"task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh"} {
		info, err := os.Stat(filepath.Join(task, f))
		if err != nil {
			t.Errorf("Harbor task file missing: %v", err)
			continue
		}
		if strings.HasSuffix(f, ".sh") && info.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s is not executable", f)
		}
	}
	test, _ := os.ReadFile(filepath.Join(task, "tests/test.sh"))
	if !strings.Contains(string(test), "/logs/verifier/reward.txt") {
		t.Error("the verifier does not write /logs/verifier/reward.txt")
	}
	dockerfile, _ := os.ReadFile(filepath.Join(task, "environment/Dockerfile"))
	if !strings.HasPrefix(strings.TrimLeft(string(dockerfile[strings.Index(string(dockerfile), "FROM"):]), " "), "FROM busybox") {
		t.Error("the example environment must build offline from the seeded busybox image")
	}
}

func TestAgentNeedsTheStackContract(t *testing.T) {
	isolate(t)
	for _, k := range []string{"TROUPE_RELAY_URL", "TROUPE_PRIVATE_KEY_FILE", "TROUPE_LLM_TOKEN_FILE", "TROUPE_CHANNEL", "TROUPE_LLM_BASE_URL",
		"TROUPE_MODEL", "TROUPE_SYSTEM_PROMPT_FILE", "TROUPE_MAX_ROUNDS", "TROUPE_DEADLINE", "TROUPE_WORKDIR"} {
		t.Setenv(k, "")
	}
	t.Setenv("TROUPE_CHANNEL", "dev")
	code, _, errOut := troupe(t, "agent")
	if code != exitFailed || !strings.Contains(errOut, "the stack contract is not met (docs/stacks.md)") ||
		!strings.Contains(errOut, "TROUPE_RELAY_URL is not set") || strings.Contains(errOut, "TROUPE_CHANNEL is not set") {
		t.Errorf("agent without its environment: exit %d\n%s", code, errOut)
	}
	if code, out, _ := troupe(t, "agent", "--help"); code != exitOK || !strings.Contains(out, "TROUPE_SYSTEM_PROMPT_FILE  the composed persona prompt") {
		t.Errorf("agent --help: %d %q", code, out)
	}
}

func TestCompareAndViewCommands(t *testing.T) {
	jobs, _ := filepath.Abs("../../report/testdata/jobs")
	isolate(t)
	code, out, errOut := troupe(t, "compare", jobs, "--baseline", "solo-mock")
	if code != exitOK || !strings.Contains(out, "team-mock  10     +40.0 pp") || !strings.Contains(out, "Policy: passed counts as a pass") {
		t.Errorf("compare: %d\n%s%s", code, out, errOut)
	}
	code, _, _ = troupe(t, "compare", jobs, "--format", "html", "--out", "report.html")
	if data, err := os.ReadFile("report.html"); code != exitOK || err != nil || !strings.HasPrefix(string(data), "<!DOCTYPE html>") {
		t.Errorf("compare --format html --out: %d %v", code, err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"compare", jobs, "--format", "pdf"}, exitUsage, `--format "pdf" is not one of table, markdown, json, html`},
		{[]string{"compare", jobs, "--baseline", "nobody"}, exitFailed, `no condition "nobody" among solo-mock, team-mock`},
		{[]string{"compare", t.TempDir()}, exitFailed, "holds no trial results"},
		{[]string{"compare"}, exitUsage, "needs at least one job folder"},
		{[]string{"view", "no-such-folder"}, exitFailed, "is not a folder of results"},
	} {
		code, _, errOut := troupe(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, errOut)
		}
	}
}

// TestTasksLoad reports each task of a dataset: loaded, loaded with
// warnings, refused with its reasons; exit 1 when any is refused.
func TestTasksLoad(t *testing.T) {
	root, _ := filepath.Abs("../..") // before isolate leaves this folder
	dir := isolate(t)
	parts := map[string]string{"instruction.md": "Do it.\n", "environment/Dockerfile": "FROM busybox\n", "tests/test.sh": "#!/bin/sh\n"}
	for name, toml := range map[string]string{
		"good":    "[agent]\ntimeout_sec = 60\n",
		"warned":  "[agent]\ntimeout_secs = 60\n",
		"refused": "[environment]\ngpus = 2\n",
	} {
		write(t, filepath.Join(dir, "set", name, "task.toml"), toml)
		for p, content := range parts {
			write(t, filepath.Join(dir, "set", name, p), content)
		}
	}
	code, out, _ := troupe(t, "tasks", "load", filepath.Join(dir, "set"))
	for _, want := range []string{
		"loaded   " + filepath.Join(dir, "set", "good"),
		"warned   " + filepath.Join(dir, "set", "warned"),
		`did you mean "timeout_sec"?`,
		"refused  " + filepath.Join(dir, "set", "refused"),
		"gpus: 2: troupe does not give trials GPUs",
		"3 tasks: 1 loaded, 1 loaded with warnings, 1 refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != exitFailed {
		t.Errorf("exit %d with a refused task", code)
	}
	code, out, _ = troupe(t, "tasks", "load", "--json", "--strict", filepath.Join(dir, "set", "warned"))
	var r taskReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Status != "refused" || code != exitFailed || !strings.Contains(strings.Join(r.Problems, "\n"), "(refused: --strict)") {
		t.Errorf("--json --strict: exit %d, %+v, %v\n%s", code, r, err, out)
	}
	// A multi-step task loads, its steps named.
	code, out, _ = troupe(t, "tasks", "load", filepath.Join(root, "trial/testdata/tasks/hello-multi-step"))
	if code != exitOK || !strings.Contains(out, "2 steps: create-file, append-content") {
		t.Errorf("a multi-step task: exit %d\n%s", code, out)
	}
	code, out, _ = troupe(t, "tasks", "load", "--json", filepath.Join(root, "trial/testdata/tasks/hello-multi-step"))
	r = taskReport{}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != exitOK || strings.Join(r.Steps, ",") != "create-file,append-content" {
		t.Errorf("a multi-step task, --json: exit %d, %+v, %v\n%s", code, r, err, out)
	}
}

// TestRunRefusesARealKeyInTaskEnv: a task whose env takes a host variable
// that holds an endpoint's real API key would put the key in the trial
// container: troupe run refuses it before anything starts.
func TestRunRefusesARealKeyInTaskEnv(t *testing.T) {
	root, _ := filepath.Abs("../..") // before isolate leaves this folder
	dir := isolate(t)
	t.Setenv("TROUPE_TEST_PROVIDER_KEY", "sk-real-key-never-in-a-container")
	config := filepath.Join(dir, "troupe.yaml")
	write(t, config, "endpoints:\n  prov:\n    api: openai\n    base_url: http://127.0.0.1:9/v1\n    api_key_env: TROUPE_TEST_PROVIDER_KEY\n    model: m\n")
	taskDir := filepath.Join(dir, "leaky")
	write(t, filepath.Join(taskDir, "task.toml"), "[environment.env]\nKEY = \"${TROUPE_TEST_PROVIDER_KEY}\"\n")
	write(t, filepath.Join(taskDir, "instruction.md"), "Do it.\n")
	write(t, filepath.Join(taskDir, "environment", "Dockerfile"), "FROM busybox\n")
	write(t, filepath.Join(taskDir, "tests", "test.sh"), "#!/bin/sh\n")
	code, _, errOut := troupe(t, "run", "--config", config, filepath.Join(root, "examples/manifests/solo.yaml"), "--tasks", taskDir)
	if code != exitFailed || !strings.Contains(errOut, "takes ${TROUPE_TEST_PROVIDER_KEY}, the API key of endpoint prov") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	if strings.Contains(errOut, "sk-real-key") || strings.Contains(errOut, "is not valid") {
		t.Errorf("the refusal quotes the key, or refuses something else too: %s", errOut)
	}
}

// TestRuntimeSelection: --runtime, TROUPE_RUNTIME and the config file's
// runtime name the backend; a name troupe has no backend for is a usage
// error naming those it has, before anything is opened.
func TestRuntimeSelection(t *testing.T) {
	dir := isolate(t)
	for _, tc := range []struct {
		args []string
		env  string
		conf string
	}{
		{args: []string{"clean", "--dry-run", "--runtime", "podman"}},
		{args: []string{"doctor"}, env: "podman"},
		{args: []string{"clean", "--dry-run"}, conf: "runtime: podman\n"},
		{args: []string{"run", "x.yaml", "--tasks", "t", "--runtime", "podman"}},
	} {
		t.Setenv("TROUPE_RUNTIME", tc.env)
		os.Remove(filepath.Join(dir, "troupe.yaml"))
		if tc.conf != "" {
			write(t, filepath.Join(dir, "troupe.yaml"), tc.conf)
		}
		code, out, errOut := troupe(t, tc.args...)
		if tc.args[0] == "run" {
			// run checks its inputs first: x.yaml is missing.
			if code == exitOK || strings.Contains(out+errOut, "panic") {
				t.Errorf("%v: exit %d\n%s%s", tc.args, code, out, errOut)
			}
			continue
		}
		if code != exitUsage || !strings.Contains(out+errOut, `"podman" is not a backend troupe has: docker`) {
			t.Errorf("%v (TROUPE_RUNTIME=%q, config %q): exit %d\n%s%s", tc.args, tc.env, tc.conf, code, out, errOut)
		}
	}
}

// TestValidateChecksWhatRunChecks: troupe validate reports every problem
// troupe run would refuse a manifest for, at once and in both outputs: a
// stale persona pin together with a broken stack, a harness that names no
// stack, a condition that cannot name trial folders, a manifest that does
// not load beside a stacks file that does not either. Each of a stack's
// files is a problem of its own.
func TestValidateChecksWhatRunChecks(t *testing.T) {
	hello := repoPath(t, "examples/tasks/hello-world")
	dir := isolate(t)
	write(t, filepath.Join(dir, "p.md"), "p")
	write(t, filepath.Join(dir, "dist", "agent"), "agent v2")
	stacks := "stacks:\n  mine:\n    command: [/opt/mine/agent]\n    files:\n      - {path: dist/agent, to: /opt/mine/agent, mode: \"0755\", sha256: \"" + digest([]byte("agent v1")) + "\"}\n" +
		"      - {path: dist/gone, to: /opt/mine/gone, sha256: \"" + digest(nil) + "\"}\n"
	harness := func(name string) string { return "model_revision: r\n    harness: " + name }
	changed := "dist/agent (resolved against " + dir + ", the folder of stacks.yaml: " + filepath.Join(dir, "dist", "agent") + ") has " + digest([]byte("agent v2")) + ", but the stack pins " + digest([]byte("agent v1"))
	for _, c := range []struct {
		name   string
		doc    string
		stacks string    // "": stacks
		want   []problem // Message is a part of the message; File is m.yaml when ""
	}{
		{"a stale persona and a changed stack",
			strings.Replace(manifestDoc("p.md", sum("old"), "mock/x"), "model_revision: r", harness("mine"), 1),
			"", []problem{{Line: 12, Col: 15, Path: "roster[0].prompt.sha256", Message: "p.md does not match its pin"},
				{Path: "roster[0].harness", Message: "stack mine: " + changed},
				{Path: "roster[0].harness", Message: "stack mine: dist/gone (resolved against " + dir + ", the folder of stacks.yaml: " + filepath.Join(dir, "dist", "gone") + ") does not exist"}}},
		{"a typo in the agent a bridge hosts",
			strings.Replace(manifestDoc("p.md", sum("p"), "mock/x"), "model_revision: r", harness("goose"), 1),
			"stacks:\n  goose:\n    command: [/opt/troupe/bin/troupe, acp, --, /opt/mine/agnet, acp]\n    files:\n      - {path: dist, to: /opt/mine, sha256: \"" + folderDigest(t, filepath.Join(dir, "dist")) + "\"}\n",
			[]problem{{Path: "roster[0].harness", Message: "the agent troupe acp hosts /opt/mine/agnet is not in the upload, though its folder is"}}},
		{"an undefined harness",
			strings.Replace(manifestDoc("p.md", sum("p"), "mock/x"), "model_revision: r", harness("nobody"), 1),
			"", []problem{{Path: "roster[0].harness", Message: `harness "nobody" names no stack (defined: mine`}}},
		{"a condition that names no folder",
			strings.Replace(manifestDoc("p.md", sum("p"), "mock/x"), "condition: t", `condition: "a b"`, 1),
			"", []problem{{Path: "condition", Message: `"a b" cannot name a trial folder and channel`}}},
		{"a manifest that does not load and a broken stacks file",
			strings.Replace(manifestDoc("p.md", sum("p"), "mock/x"), "kind: orchestrator", "kind: boss", 1),
			"stacks:\n  x: 1\n", []problem{{Line: 4, Col: 11, Path: "roster[0].kind", Message: "must be one of orchestrator, worker"},
				{File: "stacks.yaml", Line: 2, Col: 6, Path: "stacks.x", Message: "must be a mapping"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			write(t, filepath.Join(dir, "m.yaml"), c.doc)
			write(t, filepath.Join(dir, "stacks.yaml"), cmp.Or(c.stacks, stacks))
			code, out, _ := troupe(t, "validate", "m.yaml")
			if code != exitFailed || !strings.Contains(out, fmt.Sprintf("FAIL  m.yaml  %s\n", plural(len(c.want), "problem"))) {
				t.Errorf("text: exit %d\n%s", code, out)
			}
			code, js, _ := troupe(t, "validate", "--json", "m.yaml")
			var res struct{ Manifests []validateResult }
			if err := json.Unmarshal([]byte(js), &res); err != nil || code != exitFailed || len(res.Manifests) != 1 {
				t.Fatalf("--json: exit %d, %v\n%s", code, err, js)
			}
			got := res.Manifests[0].Errors
			if len(got) != len(c.want) {
				t.Fatalf("--json: want %d problems, got %+v", len(c.want), got)
			}
			for i, w := range c.want {
				g := got[i]
				if g.File != cmp.Or(w.File, "m.yaml") || g.Line != w.Line || g.Col != w.Col || g.Path != w.Path || !strings.Contains(g.Message, w.Message) {
					t.Errorf("--json problem %d: %+v, want %+v", i, g, w)
				}
				if !strings.Contains(out, "  "+g.String()+"\n") {
					t.Errorf("text lacks %q:\n%s", g, out)
				}
			}
			// troupe run refuses the manifest for the same problems, all of them.
			code, _, errOut := troupe(t, "run", "m.yaml", "--tasks", hello, "--dry-run")
			for _, w := range c.want {
				if code != exitFailed || !strings.Contains(errOut, w.Message) {
					t.Errorf("run: exit %d, lacks %q:\n%s", code, w.Message, errOut)
				}
			}
		})
	}
}
