package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupebench/troupe/internal/yaml11"
)

// BuiltinPrefix marks a pinned path that names one of troupe's built-in
// personas instead of a file: "troupe:lead" is personas/library/lead.md.
const BuiltinPrefix = "troupe:"

// MaxArtifactSize bounds one pinned file; a persona prompt is a few KiB.
const MaxArtifactSize = 8 << 20

// Sources says where pinned files are read from.
type Sources struct {
	// Dir is the artifact root that relative paths resolve in; paths cannot
	// leave it (no "..", no symlink out). Empty means the current directory.
	Dir string
	// Builtin holds the built-in personas as <name>.md; nil refuses
	// "troupe:" paths.
	Builtin fs.FS
}

// DefaultDir is the artifact root when none is given: the manifest's folder.
func DefaultDir(manifestPath string) string { return filepath.Dir(manifestPath) }

// Team is a verified manifest: the roster expanded into agents, and the bytes
// of every pinned file exactly as they were hashed.
type Team struct {
	Manifest *Manifest
	// Agents lists the orchestrator first, then the workers in roster order.
	Agents []Agent
	// Files maps each pinned path to its verified bytes.
	Files map[string][]byte
}

// Agent is one team member: a class instance named <class id>-<n>.
type Agent struct {
	ID                    string
	ClassID               string
	N                     int
	Kind                  Kind
	Role                  string
	Endpoint              string
	ModelRevision         string
	Harness               Harness
	IncludePlatformPrompt bool
	// Prompt is the persona prompt's bytes (shared with Team.Files).
	Prompt     []byte
	Generation Generation
	Budget     Budget
}

// Orchestrator returns the team's one orchestrator.
func (t *Team) Orchestrator() Agent { return t.Agents[0] }

// Verify reads every pinned file once, checks its SHA-256 against the pin and
// expands the roster. Every missing file and every mismatch is reported,
// located at the pin, as a located.List.
func (m *Manifest) Verify(src Sources) (*Team, error) {
	d := yaml11.Decoder{File: m.file}
	files := map[string][]byte{}
	failed := map[string]bool{}
	var root *os.Root
	for _, r := range m.Refs() {
		ref := r.Ref
		if _, ok := files[ref.Path]; ok || failed[ref.Path] {
			continue
		}
		data, err := readArtifact(&root, src, ref.Path)
		if err != nil {
			failed[ref.Path] = true
			d.Errorf(ref.at.path, yaml11.Key(r.Key, "path"), "%s", err)
			continue
		}
		if sum := digest(data); sum != ref.SHA256 {
			failed[ref.Path] = true
			d.Errorf(ref.at.hash, yaml11.Key(r.Key, "sha256"),
				"%s does not match its pin: the manifest pins %s, the file has %s; if the change is intended, run: troupe pin %s",
				ref.Path, ref.SHA256, sum, m.file)
			continue
		}
		files[ref.Path] = data
	}
	if root != nil {
		root.Close()
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return &Team{Manifest: m, Agents: m.expand(files), Files: files}, nil
}

// expand names the agents: orchestrator classes first, then the others, each
// in roster order, n counting from 1.
func (m *Manifest) expand(files map[string][]byte) []Agent {
	agents := make([]Agent, 0, m.Agents())
	for _, orchestratorPass := range []bool{true, false} {
		for _, c := range m.Roster {
			if (c.Kind == Orchestrator) != orchestratorPass {
				continue
			}
			for n := 1; n <= c.Count; n++ {
				agents = append(agents, Agent{
					ID:                    fmt.Sprintf("%s-%d", c.ID, n),
					ClassID:               c.ID,
					N:                     n,
					Kind:                  c.Kind,
					Role:                  c.Role,
					Endpoint:              c.Endpoint,
					ModelRevision:         c.ModelRevision,
					Harness:               c.Harness,
					IncludePlatformPrompt: c.IncludePlatformPrompt,
					Prompt:                files[c.Prompt.Path],
					Generation:            c.Generation,
					Budget:                c.Budget,
				})
			}
		}
	}
	return agents
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// readArtifact reads one pinned file, bounded in size, from the built-in
// personas or from inside the artifact root. The root is opened on first use.
func readArtifact(root **os.Root, src Sources, path string) ([]byte, error) {
	if name, ok := strings.CutPrefix(path, BuiltinPrefix); ok {
		if src.Builtin == nil {
			return nil, fmt.Errorf("%s names a built-in persona, but none are available here", path)
		}
		data, err := fs.ReadFile(src.Builtin, name+".md")
		if err != nil {
			return nil, fmt.Errorf("%s: no built-in persona %q; troupe personas list shows them", path, name)
		}
		return data, nil
	}
	dir := src.Dir
	if dir == "" {
		dir = "."
	}
	if filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s is an absolute path; pinned paths are relative to the artifact root %s", path, dir)
	}
	if !filepath.IsLocal(filepath.FromSlash(path)) {
		return nil, fmt.Errorf("%s leaves the artifact root %s; set --artifact-root to a folder that contains it", path, dir)
	}
	if *root == nil {
		r, err := os.OpenRoot(dir)
		if err != nil {
			return nil, fmt.Errorf("cannot open the artifact root %s to read %s: %w", dir, path, err)
		}
		*root = r
	}
	f, err := (*root).Open(filepath.FromSlash(path))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist under the artifact root %s; fix the path or set --artifact-root", path, dir)
		}
		return nil, fmt.Errorf("cannot read %s under the artifact root %s: %w", path, dir, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file; pin a file", path)
	}
	data, err := readAtMost(f, MaxArtifactSize, "pinned files are prompts, not data")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}
