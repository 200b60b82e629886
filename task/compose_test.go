package task

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/runtime"
)

// composeTask writes a task whose environment/ has the compose file, a
// Dockerfile, and a sidecar folder with its own Dockerfile.
func composeTask(t *testing.T, compose string) string {
	t.Helper()
	dir := writeTask(t, "[environment]\ncpus = 2\n[environment.env]\nGREETING = \"hi\"\n", allParts...)
	for name, content := range map[string]string{
		"environment/docker-compose.yaml": compose,
		"environment/db/Dockerfile.db":    "FROM busybox\n",
	} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// harborCompose is shaped like Harbor's own compose files, with two
// sidecars.
const harborCompose = `services:
  main:
    build:
      context: ${CONTEXT_DIR}
    image: ${MAIN_IMAGE_NAME}
    command: ["sh", "-c", "sleep infinity"]
    network_mode: ${NETWORK_MODE:-bridge}
    environment:
      - TEST_DIR=${TEST_DIR}
      - DB=db:5432
      - SAY=${GREETING}
    volumes:
      - ${HOST_VERIFIER_LOGS_PATH}:${ENV_VERIFIER_LOGS_PATH}
      - ${HOST_AGENT_LOGS_PATH}:${ENV_AGENT_LOGS_PATH}
    deploy:
      resources:
        limits:
          cpus: ${CPUS}
          memory: ${MEMORY}
    depends_on:
      db:
        condition: service_healthy
  web:
    image: busybox
    command: ["httpd", "-f", "-p", "8080"]
    ports: ["8080:8080"]
    depends_on: [db]
  db:
    build:
      context: ./db
      dockerfile: Dockerfile.db
    environment:
      TOKEN: ${TROUPE_TEST_DB_TOKEN:-none}
    healthcheck:
      test: ["CMD", "test", "-f", "/ready"]
      interval: 1s
      retries: 5
    command: ["sh", "-c", "touch /ready; sleep 1000"]
`

func TestComposeAsHarborWritesIt(t *testing.T) {
	dir := composeTask(t, harborCompose)
	tk, err := Load(dir, Options{Getenv: func(k string) string { return map[string]string{"TROUPE_TEST_DB_TOKEN": "s3cret"}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	c := tk.Compose
	if c == nil {
		t.Fatal("no compose")
	}
	env := filepath.Join(dir, "environment")
	for _, check := range []struct {
		what      string
		got, want any
	}{
		{"main build", c.Main.BuildDir, env},
		{"main image", c.Main.Image, ""},
		{"main command (troupe's)", len(c.Main.Command), 0},
		{"main env", fmt.Sprint(c.Main.Env), "map[DB:db:5432 SAY:hi TEST_DIR:/tests]"},
		{"main depends", fmt.Sprint(c.Main.DependsOn), "[{db service_healthy}]"},
		{"order", fmt.Sprint(c.Sidecars[0].Name, c.Sidecars[1].Name), "dbweb"},
		{"db build", c.Sidecars[0].BuildDir, filepath.Join(env, "db")},
		{"db dockerfile", c.Sidecars[0].Dockerfile, "Dockerfile.db"},
		{"db env", fmt.Sprint(c.Sidecars[0].Env), "map[TOKEN:s3cret]"},
		{"db health", fmt.Sprintf("%+v", *c.Sidecars[0].Healthcheck), fmt.Sprintf("%+v", runtime.Healthcheck{Test: []string{"CMD", "test", "-f", "/ready"}, Interval: time.Second, Retries: 5})},
		{"db command", fmt.Sprint(c.Sidecars[0].Command), "[sh -c touch /ready; sleep 1000]"},
		{"web image", c.Sidecars[1].Image, "busybox"},
		{"web depends", fmt.Sprint(c.Sidecars[1].DependsOn), "[{db service_started}]"},
		{"from host", tk.FromHost["TROUPE_TEST_DB_TOKEN"].Reveal(), "s3cret"},
		// Harbor's own keys of main pass silently; a published port is said.
		{"warnings", strings.Join(tk.Warnings, "\n"), env + "/docker-compose.yaml: services.web.ports: ignored: troupe publishes no port"},
	} {
		if fmt.Sprint(check.got) != fmt.Sprint(check.want) {
			t.Errorf("%s: %v, want %v", check.what, check.got, check.want)
		}
	}
}

// TestComposeProblems: what would give a service the host, and what does
// not hold together, is refused, each naming the service and key.
func TestComposeProblems(t *testing.T) {
	for _, c := range []struct {
		name, compose string
		want          []string
	}{
		{"privileges", "services:\n  main:\n    privileged: true\n  side:\n    image: busybox\n    cap_add: [SYS_ADMIN]\n    pid: host\n    network_mode: host\n",
			[]string{"services.main.privileged: not supported", "services.side.cap_add: not supported", "services.side.pid: not supported"}},
		{"volumes other than binds", "services:\n  main:\n    volumes: [\"/etc:/host-etc\", \"/scratch\"]\n  side:\n    image: busybox\n    volumes:\n      - data:/data\n      - {type: tmpfs, target: /tmp/x}\n      - {type: bind, source: /srv, target: /srv, bind: {selinux: z}}\nvolumes:\n  data: {}\n",
			[]string{"services.main.volumes: /scratch: an anonymous volume is not supported", `services.side.volumes: data:/data: named volume "data" is not supported`, "bind a host folder instead (allowed with troupe run --allow-host-path)",
				"services.side.volumes: /tmp/x: a tmpfs volume is not supported", "services.side.volumes: /srv:/srv: bind options selinux and propagation are not supported", "top-level volumes: not supported"}},
		{"cycle", "services:\n  main: {}\n  a:\n    image: busybox\n    depends_on: [b]\n  b:\n    image: busybox\n    depends_on: [a]\n",
			[]string{"dependency cycle detected: a -> b -> a"}},
		{"build outside", "services:\n  main: {}\n  a:\n    build:\n      context: ../..\n",
			[]string{"services.a.build: context", "is outside the task's folder"}},
		{"depends on main", "services:\n  main: {}\n  a:\n    image: busybox\n    depends_on: [main]\n",
			[]string{"no service may depend on main"}},
		{"no image", "services:\n  main: {}\n  a:\n    environment: [X=1]\n",
			[]string{`service "a" has neither an image nor a build context`}},
		{"not yaml", "services: [\n", []string{"docker-compose.yaml"}},
		{"devices", "services:\n  main:\n    devices: [\"/dev/kvm:/dev/kvm\"]\n", []string{"services.main.devices: not supported"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(composeTask(t, c.compose), Options{})
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestComposeOnly: a task with a compose file and no Dockerfile loads when
// its main service says what to run, and is refused otherwise.
func TestComposeOnly(t *testing.T) {
	dir := writeTask(t, "", "instruction.md", "tests/test.sh")
	p := filepath.Join(dir, "environment", ComposeFile)
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("services:\n  main:\n    image: busybox\n"), 0o644)
	if tk, err := Load(dir, Options{}); err != nil || tk.Compose.Main.Image != "busybox" {
		t.Errorf("compose-only task: %v", err)
	}
	os.WriteFile(p, []byte("services:\n  side:\n    image: busybox\n"), 0o644)
	if _, err := Load(dir, Options{}); err == nil || !strings.Contains(err.Error(), `no service "main"`) {
		t.Errorf("no main: %v", err)
	}
}

// TestComposeMainCommand: Harbor's "sleep infinity" for main passes in
// silence; a command that does work is said not to run.
func TestComposeMainCommand(t *testing.T) {
	for cmd, warned := range map[string]bool{
		`["sh", "-c", "sleep infinity"]`: false,
		`[ "sleep", "infinity" ]`:        false,
		`sleep infinity`:                 false,
		`["bash", "-lc", "/app/setup_databases.py && sleep infinity"]`: true,
	} {
		tk, err := Load(composeTask(t, "services:\n  main:\n    command: "+cmd+"\n"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(strings.Join(tk.Warnings, "\n"), "services.main.command: not run"); got != warned {
			t.Errorf("%s: warned %v, want %v: %v", cmd, got, warned, tk.Warnings)
		}
	}
}

// FuzzCompose: whatever a compose file holds, loading a task with it
// returns a task or an error, never a panic, and a loaded task's
// sidecars come after what they depend on.
func FuzzCompose(f *testing.F) {
	for _, s := range []string{harborCompose, "services:\n  main: {}\n", "services:\n  main:\n    depends_on: [a]\n  a:\n    image: x\n", "services: [\n", "x-a: &a {image: b}\nservices:\n  main: {}\n  s: *a\n"} {
		f.Add(s)
	}
	dir := f.TempDir()
	for p, body := range map[string]string{"task.toml": "", "instruction.md": "x\n", "environment/Dockerfile": "FROM x\n", "tests/test.sh": "x\n"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644)
	}
	f.Fuzz(func(t *testing.T, compose string) {
		if err := os.WriteFile(filepath.Join(dir, "environment", ComposeFile), []byte(compose), 0o644); err != nil {
			t.Fatal(err)
		}
		tk, err := Load(dir, Options{Getenv: func(string) string { return "" }})
		if err != nil || tk.Compose == nil {
			return
		}
		seen := map[string]bool{}
		for _, s := range tk.Compose.Sidecars {
			for _, d := range s.DependsOn {
				if !seen[d.Service] {
					t.Fatalf("%s starts before %s, which it depends on", s.Name, d.Service)
				}
			}
			seen[s.Name] = true
		}
	})
}

// TestComposeReadsOnlyTheTasksFiles: env files, included and extended
// files come from the task's folder; a host file, a link out of the
// folder or a device is refused, not read (a device would hang the load).
func TestComposeReadsOnlyTheTasksFiles(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "host.env")
	os.WriteFile(outside, []byte("HOST_SECRET=x\n"), 0o644)
	for _, c := range []struct {
		name, compose string
		link          string // environment/link.env points here
		want          string
	}{
		{"env file in the task", "services:\n  main:\n    env_file: own.env\n", "", ""},
		{"host env file", "services:\n  main:\n    env_file: " + outside + "\n", "", "is outside the task's folder"},
		{"link out", "services:\n  main:\n    env_file: link.env\n", outside, "is outside the task's folder"},
		{"device", "services:\n  main:\n    env_file: /dev/zero\n", "", "is outside the task's folder"},
		{"device in the task", "services:\n  main:\n    env_file: link.env\n", "/dev/zero", "is outside the task's folder"},
		{"extends a host file", "services:\n  main:\n    extends:\n      file: /etc/hostname\n      service: x\n", "", "is outside the task's folder"},
		{"includes a device", "include:\n  - /dev/zero\nservices:\n  main: {}\n", "", "is outside the task's folder"},
		{"remote include", "include:\n  - https://example.com/c.yaml\nservices:\n  main: {}\n", "", "remote compose files are not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := composeTask(t, c.compose)
			os.WriteFile(filepath.Join(dir, "environment", "own.env"), []byte("OWN=1\n"), 0o644)
			if c.link != "" {
				os.Symlink(c.link, filepath.Join(dir, "environment", "link.env"))
			}
			done := make(chan struct{})
			var tk *Task
			var err error
			go func() { tk, err = Load(dir, Options{}); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the load hangs")
			}
			switch {
			case c.want == "" && (err != nil || tk.Compose.Main.Env["OWN"] != "1"):
				t.Errorf("%v %+v", err, tk)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v does not say %q", err, c.want)
			}
		})
	}
}

// TestComposeUnsetVariable: a variable taken whole that nothing sets is
// said once, located; one with a default is not.
func TestComposeUnsetVariable(t *testing.T) {
	tk, err := Load(composeTask(t, "services:\n  main:\n    environment:\n      A: ${NOPE}\n      B: ${NOPE}\n      C: ${ALSO_NOPE:-fine}\n      D: ${GREETING}\n"), Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(tk.Warnings, "\n"); strings.Count(w, "${NOPE} is not set") != 1 || strings.Contains(w, "ALSO_NOPE") || strings.Contains(w, "GREETING") {
		t.Errorf("warnings:\n%s", w)
	}
	if env := tk.Compose.Main.Env; env["A"] != "" || env["C"] != "fine" || env["D"] != "hi" {
		t.Errorf("env %v", env)
	}
}

// TestComposeSidecarLimits: a sidecar's own limits are read, from the
// older keys or deploy's (compose refuses the two with different values), for the trial to apply the tighter
// of them and the task's; main's stay the task's.
func TestComposeSidecarLimits(t *testing.T) {
	dir := composeTask(t, `services:
  main:
    image: busybox
    pids_limit: 7
  a:
    image: busybox
    cpus: 0.5
    mem_limit: 256m
    pids_limit: 40
  b:
    image: busybox
    deploy:
      resources:
        limits: {cpus: "0.25", memory: 64M, pids: 20}
`)
	tk, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range append([]Service{tk.Compose.Main}, tk.Compose.Sidecars...) {
		got[s.Name] = fmt.Sprint(s.CPUs, " ", s.MemoryMB, " ", s.Pids)
	}
	for name, want := range map[string]string{"main": "0 0 0", "a": "0.5 256 40", "b": "0.25 64 20"} {
		if got[name] != want {
			t.Errorf("%s: cpus, memory_mb, pids %q, want %q", name, got[name], want)
		}
	}
	if w := strings.Join(tk.Warnings, "\n"); strings.Contains(w, "services.a.") || strings.Contains(w, "services.b.") || !strings.Contains(w, "services.main.pids_limit: ignored") {
		t.Errorf("warnings:\n%s", w)
	}
}

// TestComposeHostMounts: a service that binds host paths loads (Harbor
// hands the file to docker compose as it is); each bind is listed with
// its service, its source as compose makes it (${HOME} interpolated, a
// relative path made absolute against environment/) and its own ":ro".
// Whether a trial mounts it is the user's to allow (trial.HostPaths).
func TestComposeHostMounts(t *testing.T) {
	compose := "services:\n  main:\n    volumes:\n      - ${HOME}/.config/gcloud:/root/.config/gcloud\n      - ${HOST_VERIFIER_LOGS_PATH}:${ENV_VERIFIER_LOGS_PATH}\n  side:\n    image: busybox\n    volumes: [\"./data/../seed:/seed:ro\", \"/srv/x/:/x/\"]\n"
	dir := composeTask(t, compose)
	tk, err := Load(dir, Options{Getenv: func(k string) string { return map[string]string{"HOME": "/home/me"}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(tk.Dir, "environment")
	want := []HostMount{
		{Service: "main", Source: "/home/me/.config/gcloud", Target: "/root/.config/gcloud"},
		{Service: "side", Source: filepath.Join(env, "seed"), Target: "/seed", ReadOnly: true},
		{Service: "side", Source: "/srv/x", Target: "/x"},
	}
	if got := tk.HostMounts(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("host mounts:\n%v\nwant\n%v", got, want)
	}
	if len(tk.Warnings) != 0 {
		t.Errorf("warnings: %v", tk.Warnings)
	}
}
