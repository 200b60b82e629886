package oneshot

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// The placeholders a command line may hold. Each is replaced in every
// argument it appears in, but for {resume}, which must be an argument of
// its own: it becomes the --resume arguments on a turn that continues the
// agent's session, and nothing on one that starts it.
const (
	PhPrompt     = "{prompt}"      // the turn's prompt, as an argument
	PhPromptFile = "{prompt_file}" // a file holding it (private to the agent's uid)
	PhSystemFile = "{system_file}" // the persona prompt's file: the prompt then leaves it out
	PhMCPConfig  = "{mcp_config}"  // a JSON file {"mcpServers": {"troupe-team": {...}}}
	PhMCPCommand = "{mcp_command}" // the team tools' stdio server as one shell-quoted line
	PhMCPSocket  = "{mcp_socket}"  // the socket that server's --socket names
	PhResume     = "{resume}"
	PhWorkdir    = "{workdir}"
)

// template is the agent's command line, as the stack gives it, and what
// it asks of the bridge.
type template struct {
	argv   []string
	resume []string
	// stdin: the prompt goes on standard input (no {prompt} or
	// {prompt_file} in the command).
	stdin bool
	// systemApart: the agent takes the persona from {system_file}.
	systemApart bool
	// mcp: the agent is given the team tools.
	mcp bool
}

// parseTemplate checks a command line and the --resume arguments.
func parseTemplate(argv, resume []string) (template, error) {
	if len(argv) == 0 || strings.TrimSpace(argv[0]) == "" {
		return template{}, errors.New("no agent to run: troupe cli [FLAGS] -- COMMAND [ARGS...]")
	}
	if strings.Contains(argv[0], "{") {
		return template{}, fmt.Errorf("the program %q holds a placeholder: only its arguments may", argv[0])
	}
	t := template{argv: argv, resume: resume}
	has := func(ph string) bool {
		for _, a := range argv[1:] {
			if strings.Contains(a, ph) {
				return true
			}
		}
		return false
	}
	resumeAt := 0
	for _, a := range argv[1:] {
		if a == PhResume {
			resumeAt++
		} else if strings.Contains(a, PhResume) {
			return template{}, fmt.Errorf("%s must be an argument of its own, not part of %q", PhResume, a)
		}
	}
	switch {
	case resumeAt > 1:
		return template{}, fmt.Errorf("%s appears %d times; once is where the --resume arguments go", PhResume, resumeAt)
	case resumeAt == 1 && len(resume) == 0:
		return template{}, fmt.Errorf("the command has %s but no --resume arguments say what continues a session", PhResume)
	case resumeAt == 0 && len(resume) > 0:
		return template{}, fmt.Errorf("--resume %q is given but the command has no %s argument to put it", strings.Join(resume, " "), PhResume)
	}
	for _, a := range resume {
		if strings.Contains(a, PhResume) {
			return template{}, fmt.Errorf("a --resume argument cannot hold %s", PhResume)
		}
	}
	t.stdin = !has(PhPrompt) && !has(PhPromptFile)
	t.systemApart = has(PhSystemFile)
	t.mcp = has(PhMCPConfig) || has(PhMCPCommand) || has(PhMCPSocket)
	return t, nil
}

// promptArg says whether the prompt goes in an argument ({prompt}).
func (t template) promptArg() bool {
	for _, a := range t.argv[1:] {
		if strings.Contains(a, PhPrompt) {
			return true
		}
	}
	return false
}

// turnValues are what the placeholders stand for on one turn.
type turnValues struct {
	prompt, promptFile, systemFile, mcpConfig, mcpCommand, mcpSocket, workdir string
	continues                                                                 bool
}

// expand is the command line of one turn.
func (t template) expand(v turnValues) []string {
	r := strings.NewReplacer(PhPrompt, v.prompt, PhPromptFile, v.promptFile, PhSystemFile, v.systemFile,
		PhMCPConfig, v.mcpConfig, PhMCPCommand, v.mcpCommand, PhMCPSocket, v.mcpSocket, PhWorkdir, v.workdir)
	out := []string{t.argv[0]}
	for _, a := range t.argv[1:] {
		if a == PhResume {
			if v.continues {
				out = append(out, t.resume...)
			}
			continue
		}
		out = append(out, r.Replace(a))
	}
	return out
}

// resolveProgram finds the program the way exec would for the agent, and
// checks that it can run: an executable regular file, of this machine's
// architecture when it is an ELF binary. A relative path is resolved
// against the working folder, where the agent runs, and the error says so.
func resolveProgram(prog, workdir string, env []string) (string, error) {
	path := prog
	switch {
	case strings.Contains(prog, "/") && !filepath.IsAbs(prog):
		path = filepath.Join(workdir, prog)
		if err := checkProgram(path); err != nil {
			return "", fmt.Errorf("%s (a relative path, resolved against the working folder %s): %w", prog, workdir, err)
		}
		return path, nil
	case !strings.Contains(prog, "/"):
		found, err := lookPath(prog, envValue(env, "PATH"))
		if err != nil {
			return "", err
		}
		path = found
	}
	if err := checkProgram(path); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return path, nil
}

// lookPath is exec.LookPath on the agent's PATH rather than the bridge's.
func lookPath(prog, pathList string) (string, error) {
	if pathList == "" {
		return "", fmt.Errorf("%s is not a path and the agent's PATH is empty: give the program's absolute path", prog)
	}
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, prog)
		if checkProgram(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not found in the agent's PATH (%s): install it in the image, upload it with the stack's files, or give its absolute path", prog, pathList)
}

// checkProgram says why path cannot be run, or nil.
func checkProgram(path string) error {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errors.New("does not exist")
	case err != nil:
		return err
	case info.IsDir():
		return errors.New("is a folder, not a program")
	case !info.Mode().IsRegular():
		return fmt.Errorf("is not a regular file (%s)", info.Mode().Type())
	case info.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("is not executable (mode %04o)", info.Mode().Perm())
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil // a script, or something the kernel will judge
	}
	defer f.Close()
	if want := elfMachine(); want != elf.EM_NONE && f.Machine != want {
		return fmt.Errorf("is built for %s, but this machine is %s", f.Machine, runtime.GOARCH)
	}
	return nil
}

func elfMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// command is exec.Command with the program already resolved, argv[0] as
// the stack wrote it.
func command(path string, argv []string) *exec.Cmd {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	return cmd
}
