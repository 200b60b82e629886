package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/troupebench/troupe/job"
)

// TestHostPathPreflight: a task whose compose file binds host folders
// loads (tasks load counts it loaded); a run is refused before anything
// starts unless each folder is allowed, the refusal naming the task, the
// service, the path and the flag; allowed (by the flag, or by the config
// file), the dry run lists each bind as it would be mounted.
func TestHostPathPreflight(t *testing.T) {
	solo, task := repoPath(t, "examples/manifests/solo.yaml"), repoPath(t, "trial/testdata/tasks/host-path")
	dir := isolate(t)
	host := filepath.Join(dir, "host")
	for _, d := range []string{"main", "served"} {
		if err := os.MkdirAll(filepath.Join(host, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TROUPE_TEST_HOST_DIR", host)

	if code, out, errOut := troupe(t, "tasks", "load", task); code != exitOK || !strings.Contains(out, "1 tasks: 1 loaded, 0 loaded with warnings, 0 refused") {
		t.Errorf("tasks load: exit %d\n%s%s", code, out, errOut)
	}

	args := []string{"run", solo, "--tasks", task, "--out", "job", "--dry-run"}
	code, out, errOut := troupe(t, args...)
	for _, want := range []string{
		"task host-path: service main binds host path " + host + "/main (at /mnt/host): not allowed: allow it with troupe run --allow-host-path " + host + "/main (read-only; add :rw to let it write) or allow_host_paths in the config file",
		"task host-path: service seed binds host path " + host + "/served (at /seed): not allowed",
	} {
		if code != exitFailed || !strings.Contains(errOut, want) {
			t.Errorf("without --allow-host-path: exit %d, does not say %q:\n%s%s", code, want, out, errOut)
		}
	}
	if strings.Contains(out, "pre-flight passed") {
		t.Errorf("pre-flight passed:\n%s", out)
	}

	code, out, errOut = troupe(t, append(args, "--allow-host-path", host)...)
	for _, want := range []string{
		`(?m)^  host-path +` + regexp.QuoteMeta(task) + ` +sha256:[0-9a-f]{64}\n    host path +main +` + regexp.QuoteMeta(host) + `/main at /mnt/host, read-only\n    host path +seed +` + regexp.QuoteMeta(host) + `/served at /seed, read-only$`,
		`(?m)^pre-flight passed`,
	} {
		if code != exitOK || !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("allowed: exit %d, does not match %s:\n%s%s", code, want, out, errOut)
		}
	}
	code, out, _ = troupe(t, append(args, "--allow-host-path", host+"/main:rw", "--allow-host-path", host+"/served", "--json")...)
	var plan job.Plan
	if err := json.Unmarshal([]byte(out), &plan); code != exitOK || err != nil || len(plan.Tasks) != 1 || len(plan.Tasks[0].HostPaths) != 2 ||
		plan.Tasks[0].HostPaths[0] != (job.PlanHostPath{Service: "main", Source: host + "/main", Host: host + "/main", Target: "/mnt/host", Write: true}) || plan.Tasks[0].HostPaths[1].Write {
		t.Errorf("--json: exit %d %v: %+v", code, err, plan.Tasks)
	}

	// The config file's allow_host_paths, relative to the file.
	write(t, filepath.Join(dir, "conf", "troupe.yaml"), "allow_host_paths: [../host]\n")
	if code, out, errOut := troupe(t, append(args, "--config", filepath.Join(dir, "conf", "troupe.yaml"))...); code != exitOK || !strings.Contains(out, host+"/served at /seed, read-only") {
		t.Errorf("allow_host_paths: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--allow-host-path", host, "--runtime", "kubernetes"}, "the kubernetes runtime binds no host path"},
		{[]string{"--allow-host-path", "/"}, "the host's root is never mounted"},
		{[]string{"--allow-host-path", filepath.Join(dir, "nope")}, "does not exist on this host"},
	} {
		if code, out, errOut := troupe(t, append(args, c.args...)...); code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want %q:\n%s%s", c.args, code, c.want, out, errOut)
		}
	}
}
