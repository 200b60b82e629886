//go:build linux

package inside

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ExecAs is a command to run the way docker exec --user --workdir --env
// runs one. A backend whose exec cannot choose these per exec (Kubernetes)
// execs troupe exec-as as root instead, and ExecAs.Exec sets them up and
// becomes the command.
type ExecAs struct {
	// User is a user as LookupUser takes it; "" is root.
	User string
	// WorkDir is the working folder; "" keeps the exec's own.
	WorkDir string
	// Env holds K=V pairs that override or add to the process's own
	// environment.
	Env []string
	// Cmd is the command and its arguments; a name without a slash is
	// looked up in the PATH of the new environment.
	Cmd []string
	// Subreaper makes the command a child subreaper (kept across exec):
	// its orphaned descendants are reparented to it rather than to PID 1,
	// as they are to a container's first process under Docker. troupe init
	// starts an image's entrypoint so, which keeps every process it starts
	// its descendant: the sweep tells them from the agents' by that.
	Subreaper bool
}

// Exit statuses of a command that did not start, as a shell and docker
// exec give them: the backend tells "not found" from "not executable" by
// them and by the words of the message.
const (
	ExitNotExecutable = 126
	ExitNotFound      = 127
)

// ExecAsError is why ExecAs.Exec could not become the command; Code is
// the exit status to end with (ExitNotFound or ExitNotExecutable). Its
// message names the command or the step that failed; only a command that
// cannot be found says "not found".
type ExecAsError struct {
	Code int
	Err  error
}

func (e *ExecAsError) Error() string { return e.Err.Error() }
func (e *ExecAsError) Unwrap() error { return e.Err }

// notExecutable is a failure to set the command up: exit 126.
func notExecutable(format string, args ...any) error {
	return &ExecAsError{Code: ExitNotExecutable, Err: fmt.Errorf(format, args...)}
}

// Files ExecAs reads the user's groups and home from: the container's own.
const (
	groupFile  = "/etc/group"
	passwdFile = "/etc/passwd"
)

// defaultPath is the PATH a command is looked up in when the environment
// has none: Docker's and runc's default.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Exec replaces the process with the command, run as the user, in the
// working folder, with the environment; it returns only when it could not,
// with an *ExecAsError. Once it returns after switching user, the process
// is no longer root: the caller must only report and exit.
func (x ExecAs) Exec() error {
	if len(x.Cmd) == 0 || x.Cmd[0] == "" {
		return notExecutable("no command to run")
	}
	u, err := LookupUser(x.User)
	if errors.Is(err, fs.ErrNotExist) {
		// Not "no such file": that would read as a missing command.
		return notExecutable("user %q: the container has no /etc/passwd", x.User)
	}
	if err != nil {
		return notExecutable("%w", err)
	}
	groups, err := supplementaryGroups(groupFile, x.User, u.Name)
	if err != nil {
		return notExecutable("supplementary groups of %q: %w", u.Name, err)
	}
	env, err := execEnv(os.Environ(), x.Env, homeOf(passwdFile, u))
	if err != nil {
		return notExecutable("%w", err)
	}
	// The folder is entered as root first, as runc does: the user may be
	// refused a folder on the way that root may cross. When root is refused
	// (a root-squashed mount), the user tries again below.
	chdirLater := false
	if x.WorkDir != "" {
		if err := os.Chdir(x.WorkDir); errors.Is(err, fs.ErrPermission) {
			chdirLater = true
		} else if err != nil {
			return workDirError(x.WorkDir, err)
		}
	}
	if x.Subreaper {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return notExecutable("become a child subreaper: %w", err)
		}
	}
	if err := becomeUser(u, groups); err != nil {
		return err
	}
	if chdirLater {
		if err := os.Chdir(x.WorkDir); err != nil {
			return workDirError(x.WorkDir, err)
		}
	}
	path, err := lookCmd(x.Cmd[0], envPath(env))
	if err != nil {
		return err
	}
	return execError(x.Cmd[0], syscall.Exec(path, x.Cmd, env))
}

// becomeUser drops root for the user: supplementary groups first, then
// the group, then the user, while the process may still change them. Go
// applies each to every thread of the process.
func becomeUser(u User, groups []int) error {
	if err := syscall.Setgroups(groups); err != nil {
		return notExecutable("set the supplementary groups %v of user %s: %w", groups, u.Spec(), err)
	}
	if err := syscall.Setgid(u.GID); err != nil {
		return notExecutable("set group %d: %w", u.GID, err)
	}
	if err := syscall.Setuid(u.UID); err != nil {
		return notExecutable("set user %d: %w", u.UID, err)
	}
	return nil
}

// workDirError says why the working folder cannot be entered, in words
// that cannot be mistaken for a missing command ("not found", "no such
// file").
func workDirError(dir string, err error) error {
	why := "cannot be entered"
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "does not exist"
	case errors.Is(err, syscall.ENOTDIR):
		why = "is not a folder"
	case errors.Is(err, fs.ErrPermission):
		why = "permission denied"
	}
	return notExecutable("working folder %s: %s", dir, why)
}

// execEnv is the command's environment: base with each K=V of overrides
// replacing or adding its key, in order, and HOME set to home unless an
// override gives it (what docker exec does; base's own HOME is the exec's,
// which is root's).
func execEnv(base, overrides []string, home string) ([]string, error) {
	given := map[string]string{}
	var keys []string
	for _, kv := range overrides {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q is not K=V", kv)
		}
		if _, again := given[k]; !again {
			keys = append(keys, k)
		}
		given[k] = kv
	}
	if _, ok := given["HOME"]; !ok {
		given["HOME"] = "HOME=" + home
		keys = append(keys, "HOME")
	}
	env := slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, replaced := given[k]
		return replaced
	})
	for _, k := range keys {
		env = append(env, given[k])
	}
	return env, nil
}

// envPath is the PATH of env, or Docker's default when it has none.
func envPath(env []string) string {
	for _, kv := range slices.Backward(env) {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return defaultPath
}

// lookCmd finds the program to run, as a shell does: a name with a slash
// as it is, else the first executable file of that name in pathList. A
// file found that the user may not execute is "permission denied" (126)
// unless a later folder has one that runs.
func lookCmd(name, pathList string) (string, error) {
	if strings.Contains(name, "/") {
		return name, runnable(name, name)
	}
	var denied error
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		err := runnable(name, p)
		if err == nil {
			return p, nil
		}
		if ee, ok := errors.AsType[*ExecAsError](err); ok && ee.Code == ExitNotExecutable && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", denied
	}
	return "", &ExecAsError{Code: ExitNotFound, Err: fmt.Errorf("%s: not found", name)}
}

// runnable checks that p exists and that the process may execute it; name
// is the command as given, for the message.
func runnable(name, p string) error {
	info, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return &ExecAsError{Code: ExitNotFound, Err: fmt.Errorf("%s: not found", name)}
	}
	if err != nil {
		return notExecutable("%s: %s", name, errnoText(err))
	}
	if info.IsDir() {
		return notExecutable("%s: is a folder", name)
	}
	// access(2) checks as the real user, which is now the command's.
	if err := unix.Access(p, unix.X_OK); err != nil {
		return notExecutable("%s: %s", name, errnoText(err))
	}
	return nil
}

// execError classifies a failed execve of a program that was found: a
// missing interpreter (ENOENT) is "not found", anything else (no execute
// permission, not a program: "exec format error") cannot execute.
func execError(name string, err error) error {
	if errors.Is(err, syscall.ENOENT) {
		return &ExecAsError{Code: ExitNotFound, Err: fmt.Errorf("%s: not found (or its interpreter is not)", name)}
	}
	return notExecutable("%s: %s", name, errnoText(err))
}

// errnoText is an error's last word: "permission denied" for EACCES,
// without the path os wraps it in.
func errnoText(err error) string {
	if errno, ok := errors.AsType[syscall.Errno](err); ok {
		return errno.Error()
	}
	return err.Error()
}

// supplementaryGroups are the groups Docker gives a process run as user
// spec, whose name in /etc/passwd is name: those of the group file that
// list name, unless spec is "" (the default user) or names a group itself
// ("agent:staff"), which have none, as with docker exec.
func supplementaryGroups(file, spec, name string) ([]int, error) {
	if spec == "" || strings.Contains(spec, ":") {
		return []int{}, nil
	}
	return memberOf(file, name)
}

// memberOf returns the gids of the groups in the group file that list name
// as a member: a user's supplementary groups, as Docker sets them. No name
// (a uid without a passwd entry), or no group file, is no groups.
func memberOf(file, name string) ([]int, error) {
	if name == "" {
		return []int{}, nil
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return []int{}, nil
	}
	if err != nil {
		return nil, err
	}
	return groupsListing(data, name), nil
}

// groupsListing reads an /etc/group file's lines, name:password:gid:members
// with the members separated by commas, and returns, once each, the gids
// of the groups whose members include name. Lines it cannot read are
// skipped, as the C library skips them.
func groupsListing(group []byte, name string) []int {
	gids := []int{}
	for line := range strings.Lines(string(group)) {
		fields := strings.Split(strings.TrimRight(line, "\r\n"), ":")
		if len(fields) != 4 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		gid, err := strconv.Atoi(fields[2])
		if err != nil || gid < 0 || !slices.Contains(strings.Split(fields[3], ","), name) || slices.Contains(gids, gid) {
			continue
		}
		gids = append(gids, gid)
	}
	return gids
}

// homeOf returns the user's home folder from the passwd file: the entry of
// its name, else of its uid; "/" when there is none, as Docker does.
func homeOf(file string, u User) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return "/"
	}
	return homeIn(data, u)
}

// homeIn reads an /etc/passwd file's lines,
// name:password:uid:gid:gecos:home:shell, for the user's home folder.
func homeIn(passwd []byte, u User) string {
	byUID := ""
	for line := range strings.Lines(string(passwd)) {
		fields := strings.Split(strings.TrimRight(line, "\r\n"), ":")
		if len(fields) != 7 || fields[5] == "" {
			continue
		}
		if u.Name != "" && fields[0] == u.Name {
			return fields[5]
		}
		if uid, err := strconv.Atoi(fields[2]); err == nil && uid == u.UID && byUID == "" {
			byUID = fields[5]
		}
	}
	if byUID != "" {
		return byUID
	}
	return "/"
}
