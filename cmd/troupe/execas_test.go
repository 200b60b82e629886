package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/troupebench/troupe/runtime"
)

// TestExecAs runs troupe exec-as in a container, as root, as a Kubernetes
// exec runs it: it does what docker exec --user --workdir --env does, then
// is its command; what cannot start ends with 126 or 127 and words the
// backend's classification reads as Docker's.
func TestExecAs(t *testing.T) {
	box := startBox(t, testDocker(t), container.HostConfig{})
	box.sh(t, `echo 'agent:x:1000:1000:an agent:/home/agent:/bin/sh' >> /etc/passwd
echo 'agent:x:1000:' >> /etc/group
echo 'staff:x:50:root,agent' >> /etc/group
echo 'tools:x:60:nobody,agent' >> /etc/group
printf 'plain text\n' > /tmp/not-a-program && chmod 644 /tmp/not-a-program
printf 'echo no shebang\n' > /tmp/no-shebang && chmod 755 /tmp/no-shebang
mkdir -p /home/agent /tmp/private && chmod 700 /tmp/private`)
	exe := runtime.BinaryPath
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
		cause  error
	}{
		{name: "uid and gid without an entry",
			args:   []string{"--user", "10001:10002", "--workdir", "/tmp", "--env", "A=b", "--", "sh", "-c", "id -u; id -g; id -G; pwd; echo $A $HOME"},
			stdout: "10001\n10002\n10002\n/tmp\nb /\n"},
		{name: "a named user with its groups and home",
			args:   []string{"--user", "agent", "--", "sh", "-c", "id -u; id -G; echo $HOME; pwd"},
			stdout: "1000\n1000 50 60\n/home/agent\n/\n"},
		{name: "a named user with another group",
			args:   []string{"--user", "agent:tools", "--", "sh", "-c", "id -g; id -G"},
			stdout: "60\n60\n"},
		{name: "a uid with a name",
			args:   []string{"--user", "1000", "--", "sh", "-c", "id -G; echo $HOME"},
			stdout: "1000 50 60\n/home/agent\n"},
		{name: "root by name",
			args:   []string{"--user", "root", "--", "sh", "-c", "id -G"},
			stdout: "0 50\n"},
		{name: "root by default",
			args:   []string{"--", "sh", "-c", "id -u; id -G; echo $HOME"},
			stdout: "0\n0\n/root\n"},
		{name: "HOME from --env wins",
			args:   []string{"--user", "agent", "--env", "HOME=/elsewhere", "--env", "PATH=/bin", "--", "sh", "-c", "echo $HOME $PATH"},
			stdout: "/elsewhere /bin\n"},
		{name: "the process is the command's own",
			// Had exec-as forked, sh's parent would be troupe; exec'd, its
			// parent is the engine's, outside the container.
			args:   []string{"--", "sh", "-c", "echo $PPID"},
			stdout: "0\n"},
		{name: "the command's flags are its own",
			args:   []string{"--user", "agent", "--", "echo", "--user", "root", "--", "-x"},
			stdout: "--user root -- -x\n"},
		{name: "exit codes pass through",
			args: []string{"--", "sh", "-c", "echo out; echo err >&2; exit 42"}, code: 42, stdout: "out\n", stderr: "err\n"},
		{name: "a root-only folder is entered as root, as runc does",
			args:   []string{"--user", "agent", "--workdir", "/tmp/private", "--", "sh", "-c", "pwd; ls . 2>/dev/null || echo denied"},
			stdout: "/tmp/private\ndenied\n"},
		{name: "not found",
			args: []string{"--user", "agent", "--", "no-such-command", "arg"}, code: 127,
			stderr: "troupe exec-as: no-such-command: not found\n", cause: runtime.ErrNotFound},
		{name: "not found with a slash",
			args: []string{"--", "/no/such/program"}, code: 127,
			stderr: "troupe exec-as: /no/such/program: not found\n", cause: runtime.ErrNotFound},
		{name: "not found in the new PATH",
			args: []string{"--env", "PATH=/nowhere", "--", "sh", "-c", "true"}, code: 127,
			stderr: "troupe exec-as: sh: not found\n", cause: runtime.ErrNotFound},
		{name: "not executable",
			args: []string{"--", "/tmp/not-a-program"}, code: 126,
			stderr: "troupe exec-as: /tmp/not-a-program: permission denied\n", cause: runtime.ErrNotExecutable},
		{name: "not a program",
			args: []string{"--", "/tmp/no-shebang"}, code: 126,
			stderr: "troupe exec-as: /tmp/no-shebang: exec format error\n", cause: runtime.ErrNotExecutable},
		{name: "a missing working folder",
			args: []string{"--workdir", "/nonexistent", "--", "true"}, code: 126,
			stderr: "troupe exec-as: working folder /nonexistent: does not exist\n", cause: runtime.ErrNotExecutable},
		{name: "an unknown user",
			args: []string{"--user", "nobody-here", "--", "true"}, code: 126,
			stderr: `troupe exec-as: user "nobody-here" does not exist in the container's /etc/passwd`, cause: runtime.ErrNotExecutable},
		{name: "a bad flag",
			args: []string{"--bogus", "--", "true"}, code: 126,
			stderr: "troupe exec-as: unknown flag: --bogus\n", cause: runtime.ErrNotExecutable},
		{name: "no command",
			args: []string{"--user", "agent", "--"}, code: 126,
			stderr: "troupe exec-as: no command to run\n", cause: runtime.ErrNotExecutable},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code, err := box.run(t, append([]string{exe, "exec-as"}, c.args...)...)
			if code != c.code || stdout != c.stdout || !strings.HasPrefix(stderr, c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q;\nwant exit %d, stdout %q, stderr %q", code, stdout, stderr, c.code, c.stdout, c.stderr)
			}
			if c.cause != nil && !errors.Is(err, c.cause) {
				t.Errorf("classified as %v; want %v", err, c.cause)
			}
		})
	}
	// An image without /etc/passwd: a user cannot be found, but that is not
	// a command that cannot.
	box.sh(t, "mv /etc/passwd /etc/passwd.away")
	_, stderr, code, err := box.run(t, exe, "exec-as", "--user", "agent", "--", "true")
	if code != 126 || !errors.Is(err, runtime.ErrNotExecutable) || !strings.Contains(stderr, "/etc/passwd") {
		t.Errorf("no /etc/passwd: exit %d, %v: %s", code, err, stderr)
	}
}
