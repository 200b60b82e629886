package trial

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
)

// maxSystemChanges bounds how many changed system files a result names.
const maxSystemChanges = 100

// differ is a container that can list what changed in it since its image
// (Docker's diff); on a backend whose containers cannot, system files are
// not checked and the result says so.
type differ interface {
	Changes(ctx context.Context) ([]runtime.Change, error)
}

// systemDirs hold what the verifier runs: shells, interpreters, libraries
// and their configuration, the tests. What an agent changes there, outside
// the task's working folders, is what could change a verdict.
var systemDirs = []string{"/bin", "/sbin", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/tests", "/opt"}

// ownFiles are changed by the engine or troupe itself, never the agents.
var ownFiles = []string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/etc/mtab", "/opt/troupe"}

// systemChanges returns the changes (of a container against its image)
// that could change what a verifier runs, as "kind path": a file of the
// image in a system folder modified or deleted, a new file that shadows a
// command (shadows lists those) or preloads a library, anything under
// /tests. A folder reported modified only because something in it changed
// is left out, as is what lies in the task's working folders.
// strictCommandsOnly narrows it to what an install script may not do:
// change or shadow a command, preload a library, touch /tests; a stack's
// install adds and upgrades libraries as a matter of course.
func systemChanges(changes []runtime.Change, shadows []string, strictCommandsOnly bool) []string {
	parents := map[string]bool{}
	for _, c := range changes {
		for p := path.Dir(c.Path); p != "/" && p != "."; p = path.Dir(p) {
			parents[p] = true
		}
	}
	var out []string
	for _, c := range changes {
		p := path.Clean(c.Path)
		if parents[p] && c.Kind == runtime.ChangeModified || slices.ContainsFunc(ownFiles, func(o string) bool { return under(p, o) }) {
			continue
		}
		hit := false
		switch {
		case under(p, "/tests"), p == "/etc/ld.so.preload":
			hit = true
		case c.Kind == runtime.ChangeAdded:
			hit = slices.Contains(shadows, p)
		case slices.Contains(inside.CommandDirs, path.Dir(p)):
			hit = true // a command replaced or removed
		case !strictCommandsOnly:
			hit = slices.ContainsFunc(systemDirs, func(d string) bool { return under(p, d) })
		}
		if hit {
			out = append(out, c.Kind+" "+p)
		}
	}
	slices.Sort(out)
	return out
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// changedSystemFiles diffs container c against its image and returns what
// systemChanges names; ok is false when the container cannot be diffed.
func (r *run) changedSystemFiles(ctx context.Context, c runtime.Container, strict bool, call func(ctx context.Context, name, arg string) ([]byte, error)) (files []string, ok bool, err error) {
	d, can := c.(differ)
	if !can {
		return nil, false, nil
	}
	changes, err := d.Changes(ctx)
	if err != nil {
		return nil, true, err
	}
	var added []string
	for _, c := range changes {
		if c.Kind == runtime.ChangeAdded && slices.Contains(inside.CommandDirs, path.Dir(c.Path)) {
			added = append(added, c.Path)
		}
	}
	var shadows []string
	if len(added) > 0 {
		arg, _ := json.Marshal(added)
		out, err := call(ctx, "shadows", string(arg))
		if err != nil {
			return nil, true, fmt.Errorf("look for shadowed commands: %w", err)
		}
		if err := json.Unmarshal(out, &shadows); err != nil {
			return nil, true, fmt.Errorf("look for shadowed commands: %w", err)
		}
	}
	return systemChanges(changes, shadows, strict), true, nil
}

// checkSystem compares the trial container with its image before the
// verifier runs (step 9): a changed system file (a shell, an interpreter,
// a library, /tests) marks the verdict untrusted and is named in the
// result, for an agent running as root (or an install script) could have
// made the verifier say what it liked.
func (r *run) checkSystem(ctx context.Context) {
	files, ok, err := r.changedSystemFiles(ctx, r.container, false, func(ctx context.Context, name, arg string) ([]byte, error) {
		return r.callInside(ctx, name, arg, nil)
	})
	switch {
	case !ok:
		r.log.Info("system files not checked: the runtime cannot diff a container against its image", "runtime", r.env.Runtime.Name())
		return
	case err != nil:
		r.cleanupError("check the system files", err)
		return
	}
	r.res.SystemChecked = true
	files = r.newSinceLastStep(files)
	if len(files) == 0 {
		return
	}
	r.res.VerdictUntrusted = true
	if len(files) > maxSystemChanges {
		files = append(files[:maxSystemChanges], fmt.Sprintf("and %d more", len(files)-maxSystemChanges))
	}
	r.res.SystemChanges = append(r.res.SystemChanges, files...)
	r.log.Warn("system files changed before the verifier: the verdict is marked untrusted", "files", strings.Join(files, ", "))
}
