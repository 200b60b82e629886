package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/job"
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
		Short: "Check manifests as troupe run would: schema, rules, pinned files and stacks",
		Long: `Check manifests against the schema and every rule, and everything troupe run checks
of a manifest before any container starts: each pinned file (prompt, persona, skills)
exists and still has the pinned sha256; the condition can name trial folders; and each
roster entry's harness names a stack (built in, under stacks: in the config file, or in
stacks.yaml beside the manifest) whose definition is sound and whose files exist and
match their sha256 (troupe stacks check says more of one stack).

Every problem of a manifest is reported at once, persona pins and stacks together, as
file:line:col: key.path: message. Warnings do not fail a manifest: an endpoint that is
not configured, and two manifests that name one condition with different rosters
(troupe run refuses them in one job).
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
	cmd.Flags().BoolVar(&opts.skipPins, "skip-pins", false, "read no pinned file, neither a persona nor a stack's: check the schema, the rules and that each harness names a sound stack")
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
	warnConditionClashes(results)
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
	m, _, err := checkManifest(path, artifactRoot, cfg, opts.skipPins)
	if err != nil {
		r.Errors = problems(path, err)
		return r
	}
	r.Valid, r.Condition, r.Hash, r.Agents = true, m.Condition, m.Hash(), m.Agents()
	r.Warnings = endpointWarnings(m, cfg)
	return r
}

// warnConditionClashes warns of two valid manifests that name one
// condition with different rosters: troupe run refuses them in one job.
// They may still be run apart, so it is a warning.
func warnConditionClashes(results []validateResult) {
	first := map[string]*validateResult{}
	for i := range results {
		r := &results[i]
		other, seen := first[r.Condition]
		switch {
		case !r.Valid:
		case !seen:
			first[r.Condition] = r
		case other.Hash != r.Hash:
			r.Warnings = append(r.Warnings, problem{File: r.File, Path: "condition", Message: fmt.Sprintf(
				"condition %q is also %s's, with another roster: troupe run refuses the two in one job, as a condition names its trial folders", r.Condition, other.File)})
		}
	}
}

// checkManifest loads a manifest and checks it as troupe run does before
// any container starts, and returns it with the condition a job runs: its
// pinned files (prompt, persona, skills) against their digests; its
// condition's name, which names trial folders; and the stacks it may run
// (the config file's, stacks.yaml's beside it), each harness naming one
// whose files match their digests. Every problem is returned at once,
// joined: a stale persona does not hide a broken stack, nor a manifest
// that does not load a broken stacks.yaml. skipPins reads no pinned file,
// neither a persona nor a stack's; the condition's team is then nil.
func checkManifest(path, artifactRoot string, cfg *config, skipPins bool) (*manifest.Manifest, job.Condition, error) {
	m, err := manifest.Load(path)
	stacks, serr := stacksFor(cfg, path)
	if err != nil {
		return nil, job.Condition{}, errors.Join(err, serr)
	}
	c := job.Condition{Path: path, Stacks: stacks}
	errs := []error{job.CheckConditionName(m), serr}
	if !skipPins {
		dir := artifactRoot
		if dir == "" {
			dir = manifest.DefaultDir(path)
		}
		c.Team, err = m.Verify(manifest.Sources{Dir: dir, Builtin: personas.FS()})
		errs = append(errs, err)
	}
	switch {
	case serr != nil:
	case skipPins:
		errs = append(errs, job.ResolveStacks(m, stacks))
	default:
		errs = append(errs, job.CheckStacks(m, stacks))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, job.Condition{}, err
	}
	return m, c, nil
}

// problems flattens an error into its problems, in the order they were
// joined: each located one where it is, and each other one (an error
// holding no located problem, such as a stack's file that changed) as a
// problem of file, whole.
func problems(file string, err error) []problem {
	var out []problem
	var walk func(error)
	walk = func(err error) {
		if e, ok := err.(*located.Error); ok {
			out = append(out, problem{File: e.File, Line: e.Line, Col: e.Col, Path: e.Path, Message: e.Err.Error()})
			return
		}
		if err == nil {
			return
		}
		if len(located.All(err)) == 0 {
			out = append(out, problem{File: file, Message: err.Error()})
			return
		}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		walk(errors.Unwrap(err))
	}
	walk(err)
	return out
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
