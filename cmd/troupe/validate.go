package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/personas"
)

type validateOptions struct {
	manifests []string
	json      bool
	skipPins  bool
}

func newValidateCmd(a *app) *cobra.Command {
	var opts validateOptions
	cmd := &cobra.Command{
		Use:   "validate MANIFEST...",
		Short: "Check manifests: schema, rules and pinned files",
		Long: `Check manifests against the schema and every rule, and verify that each pinned
file (prompt, persona, skills) exists and still has the pinned sha256.

Every problem of a file is reported at once, as file:line:col: key.path: message.
Pinned paths are relative to the artifact root: --artifact-root, $TROUPE_ARTIFACT_ROOT,
artifact_root in the config file, or else the manifest's own folder. A path
"troupe:NAME" is one of troupe's built-in personas (troupe personas list).

Exit status: 0 when every manifest is valid, 1 when any is not, 2 for a usage error.`,
		Example: `  troupe validate examples/manifests/*.yaml
  troupe validate --json manifests/team.yaml | jq '.manifests[].errors'
  troupe validate --artifact-root ~/bench manifests/tb-team.yaml`,
		Args: minArgs(1, "at least one manifest file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.manifests = args
			root, cfg, err := a.artifactRoot(cmd)
			if err != nil {
				return err
			}
			return runValidate(a.output(opts.json), opts, root, cfg)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the results as JSON")
	cmd.Flags().BoolVar(&opts.skipPins, "skip-pins", false, "check the schema only, not the pinned files")
	artifactRootFlag(cmd)
	return cmd
}

// problem is one located error or warning, as printed and as JSON.
type problem struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

func (p problem) String() string {
	return (&located.Error{File: p.File, Line: p.Line, Col: p.Col, Path: p.Path, Err: errors.New(p.Message)}).Error()
}

type validateResult struct {
	File      string    `json:"file"`
	Valid     bool      `json:"valid"`
	Condition string    `json:"condition,omitempty"`
	Hash      string    `json:"hash,omitempty"`
	Agents    int       `json:"agents,omitempty"`
	Errors    []problem `json:"errors"`
	Warnings  []problem `json:"warnings"`
}

func runValidate(out io.Writer, opts validateOptions, artifactRoot string, cfg *config) error {
	results := make([]validateResult, 0, len(opts.manifests))
	valid := 0
	for _, path := range opts.manifests {
		r := validateOne(path, opts, artifactRoot, cfg)
		if r.Valid {
			valid++
		}
		results = append(results, r)
	}
	if opts.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Valid     bool             `json:"valid"`
			Manifests []validateResult `json:"manifests"`
		}{valid == len(results), results}); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			if r.Valid {
				fmt.Fprintf(out, "ok    %s  condition %s, %s, hash %s\n", r.File, r.Condition, plural(r.Agents, "agent"), r.Hash)
			} else {
				fmt.Fprintf(out, "FAIL  %s  %s\n", r.File, plural(len(r.Errors), "problem"))
			}
			for _, p := range r.Errors {
				fmt.Fprintf(out, "  %s\n", p)
			}
			for _, p := range r.Warnings {
				fmt.Fprintf(out, "  warning: %s\n", p)
			}
		}
		if len(results) > 1 {
			fmt.Fprintf(out, "%s: %d valid, %d invalid\n", plural(len(results), "manifest"), valid, len(results)-valid)
		}
	}
	if valid != len(results) {
		return &reportedError{code: exitFailed}
	}
	return nil
}

func validateOne(path string, opts validateOptions, artifactRoot string, cfg *config) validateResult {
	r := validateResult{File: path, Errors: []problem{}, Warnings: []problem{}}
	m, err := manifest.Load(path)
	if err == nil && !opts.skipPins {
		dir := artifactRoot
		if dir == "" {
			dir = manifest.DefaultDir(path)
		}
		_, err = m.Verify(manifest.Sources{Dir: dir, Builtin: personas.FS()})
	}
	if err != nil {
		r.Errors = problems(path, err)
		return r
	}
	r.Valid, r.Condition, r.Hash, r.Agents = true, m.Condition, m.Hash(), m.Agents()
	r.Warnings = endpointWarnings(m, cfg)
	return r
}

// problems flattens an error into located problems.
func problems(file string, err error) []problem {
	if list := located.All(err); len(list) > 0 {
		out := make([]problem, len(list))
		for i, e := range list {
			out[i] = problem{File: e.File, Line: e.Line, Col: e.Col, Path: e.Path, Message: e.Err.Error()}
		}
		return out
	}
	return []problem{{File: file, Message: err.Error()}}
}

// endpointWarnings names roster endpoints that troupe run could not reach:
// neither configured nor mock/.
func endpointWarnings(m *manifest.Manifest, cfg *config) []problem {
	var out []problem
	seen := map[string]bool{}
	for i, c := range m.Roster {
		if seen[c.Endpoint] {
			continue
		}
		seen[c.Endpoint] = true
		if _, ok := cfg.endpoints.Lookup(c.Endpoint); ok {
			continue
		}
		where := "no config file was found"
		if cfg.path != "" {
			where = "it is not under endpoints: in " + cfg.path
		}
		out = append(out, problem{File: m.File(), Path: yaml11.Key(yaml11.Index("roster", i), "endpoint"),
			Message: fmt.Sprintf("endpoint %q is not configured (%s); troupe run will need it, or name it %s<scenario> for a mock model", c.Endpoint, where, llm.MockPrefix)})
	}
	return out
}

// plural writes a count with its noun: 1 agent, 3 agents.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
