package task

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/secret"
)

// envRef is a value Harbor takes from the host: ${VAR} or ${VAR:-default},
// the whole value.
var envRef = regexp.MustCompile(`^\$\{([^}:]+)(?::-(.*))?\}$`)

// resolveEnv reads an env table: string values, ${VAR} taken from the host
// (a missing one is an error, as in Harbor), ${VAR:-default} with its
// default. What comes from the host is kept in FromHost.
func (t *Task) resolveEnv(f field, m map[string]any, p *problems, getenv func(string) string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, ok := m[k].(string)
		if !ok {
			p.add(f, "%s must be a string, found %v", k, m[k])
			continue
		}
		if ref := envRef.FindStringSubmatch(v); ref != nil {
			name, def := ref[1], ref[2]
			got := getenv(name)
			switch {
			case got != "":
				v = got
			case strings.Contains(v, ":-"):
				v = def
			default:
				p.add(f, "%s takes ${%s} from the host, which does not set it: export it, or give ${%s:-default}", k, name, name)
				continue
			}
			if got != "" {
				if t.FromHost == nil {
					t.FromHost = map[string]secret.Secret{}
				}
				t.FromHost[name] = secret.New(got)
			}
		}
		out[k] = v
	}
	return out
}

// SolutionEnv resolves [solution] env for the oracle, taking ${VAR} values
// from getenv (nil: the process's environment); fromHost holds the values
// taken from the host, by variable, to be scrubbed like FromHost. The task
// is not changed: trials of it may run at once.
func (t *Task) SolutionEnv(getenv func(string) string) (env map[string]string, fromHost map[string]secret.Secret, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var p problems
	var scratch Task
	env = scratch.resolveEnv(t.solutionAt, t.solutionEnv, &p, getenv)
	if len(p.errs) > 0 {
		return nil, nil, fmt.Errorf("task %s: %w", t.Dir, located.List(p.errs))
	}
	return env, scratch.FromHost, nil
}
