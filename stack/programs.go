package stack

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/troupebench/troupe/runtime"
)

// CheckPrograms checks, as far as the host can, the programs a stack
// starts: its command and, when the command is one of troupe's bridges
// (troupe acp, troupe cli), the agent the bridge hosts, the program after
// its "--". A program in the upload must have an execute bit, and every
// ELF program uploaded must be built for x86-64 (trial containers are
// linux/amd64). What cannot be checked from the host (a program the task
// image or the install script must provide, one looked up in the agent's
// PATH) is returned as notes, saying so. files are the stack's verified
// files (Verify).
func (st *Stack) CheckPrograms(files []runtime.File) (notes []ProgramNote, err error) {
	var errs []error
	for _, f := range files {
		if m := ELFMachine(f.Data); m != "" && m != "EM_X86_64" {
			errs = append(errs, fmt.Errorf("%s is an ELF program for %s: trial containers are linux/amd64 (x86-64)", f.Path, strings.TrimPrefix(m, "EM_")))
		}
	}
	if len(st.Command) == 0 {
		return nil, errors.Join(append(errs, errors.New("the command is empty"))...)
	}
	check := func(what, prog string) {
		note, err := st.checkProgram(what, prog, files)
		if err != nil {
			errs = append(errs, err)
		} else {
			notes = append(notes, note)
		}
	}
	if st.Command[0] == runtime.BinaryPath {
		notes = append(notes, ProgramNote{Checked: true, Text: "command: troupe's own binary, in every trial container"})
	}
	progs, err := st.programs()
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range progs {
		check(p.what, p.path)
	}
	return notes, errors.Join(errs...)
}

// Unchecked says, from the stack's definition alone (no file read), what
// of the programs it starts the host cannot check: a program the task
// image, the agent's PATH or the install script must provide. troupe run
// --dry-run prints it beside the stack.
func (st *Stack) Unchecked() []string {
	progs, _ := st.programs()
	var out []string
	for _, p := range progs {
		uploaded := slices.ContainsFunc(st.Files, func(f File) bool { return f.To == p.path || strings.HasPrefix(p.path, f.To+"/") })
		if note, ok := st.uncheckedNote(p.what, p.path, uploaded); ok {
			out = append(out, note)
		}
	}
	return out
}

// program is one program a stack starts, and what it is to the stack.
type program struct{ what, path string }

// programs are the stack's command, or, for one of troupe's bridges, the
// agent it hosts (troupe's own binary is in every container).
func (st *Stack) programs() ([]program, error) {
	if len(st.Command) == 0 {
		return nil, nil
	}
	cmd := st.Command[0]
	if cmd != runtime.BinaryPath {
		return []program{{"command", cmd}}, nil
	}
	hosted, bridge, err := hostedProgram(st.Command)
	if err != nil || hosted == "" {
		return nil, err
	}
	return []program{{"the agent troupe " + bridge + " hosts", hosted}}, nil
}

// uncheckedNote is what the host cannot check of a program that is not
// in the upload (uploaded: it is, or its folder is); false when it can.
func (st *Stack) uncheckedNote(what, prog string, uploaded bool) (string, bool) {
	switch {
	case !strings.Contains(prog, "/"):
		return fmt.Sprintf("%s: %s is looked up in the agent's PATH in the container: it must be in every task image the stack runs in (not checked here)", what, prog), true
	case !path.IsAbs(prog):
		return fmt.Sprintf("%s: %s is relative: it is resolved against the task's working folder in the container (not checked here)", what, prog), true
	case uploaded:
		return "", false
	case st.Install != nil:
		return fmt.Sprintf("%s: %s is not uploaded: the install script must put it there, or every task image have it (not checked here)", what, prog), true
	}
	return fmt.Sprintf("%s: %s is not uploaded: it must be in every task image the stack runs in (not checked here)", what, prog), true
}

// ProgramNote is what CheckPrograms found of a program that can run:
// Checked when the host could check it, else what the container must hold.
type ProgramNote struct {
	Checked bool
	Text    string
}

// hostedProgram is the program a bridge command hosts: troupe acp -- X or
// troupe cli [FLAGS] -- X; "" when the command is no bridge.
func hostedProgram(command []string) (prog, bridge string, err error) {
	if len(command) < 2 || (command[1] != "acp" && command[1] != "cli") {
		return "", "", nil
	}
	bridge = command[1]
	i := slices.Index(command, "--")
	if i < 0 || i+1 >= len(command) || strings.TrimSpace(command[i+1]) == "" {
		return "", bridge, fmt.Errorf("command: troupe %s needs the agent to host after --: [%s, %s, --, PROGRAM, ARGS...]", bridge, runtime.BinaryPath, bridge)
	}
	return command[i+1], bridge, nil
}

// checkProgram checks one program: an error when it cannot run, or a note
// saying what was found or what the host could not check.
func (st *Stack) checkProgram(what, prog string, files []runtime.File) (ProgramNote, error) {
	i := slices.IndexFunc(files, func(f runtime.File) bool { return f.Path == prog })
	inFolder := slices.ContainsFunc(files, func(f runtime.File) bool { return f.Mode.IsDir() && strings.HasPrefix(prog, f.Path+"/") })
	if note, ok := st.uncheckedNote(what, prog, i >= 0 || inFolder); ok {
		return ProgramNote{Text: note}, nil
	}
	switch {
	case i >= 0 && files[i].Mode.IsDir():
		return ProgramNote{}, fmt.Errorf("%s %s is an uploaded folder, not a program", what, prog)
	case i >= 0 && files[i].Mode&0o111 == 0:
		return ProgramNote{}, fmt.Errorf("%s %s is uploaded without an execute bit (mode %04o): give the file mode \"0755\"", what, prog, uint32(files[i].Mode.Perm()))
	case i >= 0:
		return ProgramNote{Checked: true, Text: fmt.Sprintf("%s: %s is uploaded", what, prog)}, nil
	}
	return ProgramNote{}, fmt.Errorf("%s %s is not in the upload, though its folder is", what, prog)
}
