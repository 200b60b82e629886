package job

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/task"
)

// CheckEndpoints opens and closes a trial per condition on the gateway, so
// that an unconfigured endpoint, a missing price or a broken mock scenario
// is an error before any container starts. The oracle calls no model.
func (p *Plan) CheckEndpoints(ctx context.Context, g *llm.Gateway) error {
	var errs []error
	for _, c := range p.spec.Conditions {
		if c.Oracle {
			continue // no model
		}
		var agents []llm.AgentSpec
		for _, a := range c.Team.Agents {
			agents = append(agents, llm.AgentSpec{ID: a.ID, Role: a.Role, Kind: string(a.Kind), Endpoint: a.Endpoint})
		}
		t, err := g.OpenTrial(llm.TrialSpec{ID: "pre-flight check of " + c.Team.Manifest.Condition, Agents: agents, Prices: c.Team.Manifest.Prices})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
			continue
		}
		if cerr := t.Close(context.WithoutCancel(ctx)); cerr != nil {
			errs = append(errs, fmt.Errorf("%s: close the pre-flight check: %w", c.Path, cerr))
		}
	}
	return errors.Join(errs...)
}

// ProbeEndpoints asks every endpoint the job's conditions use, once each
// and all at once, whether it answers with its key (llm.Gateway.Probe):
// the dry run's check that an endpoint on a closed port, or a key the
// provider refuses, is found before any trial starts.
func (p *Plan) ProbeEndpoints(ctx context.Context, g *llm.Gateway) error {
	seen := map[string]bool{}
	var names []string
	for _, c := range p.spec.Conditions {
		if c.Oracle {
			continue
		}
		for _, a := range c.Team.Agents {
			if !seen[a.Endpoint] {
				seen[a.Endpoint] = true
				names = append(names, a.Endpoint)
			}
		}
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { errs[i] = g.Probe(ctx, name) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RefuseKeysInTaskEnv refuses a task whose [environment] env takes a value
// from a host variable that holds an endpoint's real API key: the value
// would be in the trial container, where no real key may go.
func RefuseKeysInTaskEnv(tasks []*task.Task, endpoints llm.Endpoints) error {
	keyVars := map[string]string{}
	for name, ep := range endpoints {
		if ep.APIKeyEnv != "" {
			keyVars[ep.APIKeyEnv] = name
		}
	}
	var errs []error
	for _, t := range tasks {
		for _, v := range slices.Sorted(maps.Keys(t.FromHost)) {
			if ep, ok := keyVars[v]; ok {
				errs = append(errs, fmt.Errorf("task %s: task.toml takes ${%s}, the API key of endpoint %s, into the trial container: real keys never enter trial containers (agents reach models through troupe's gateway)", t.Dir, v, ep))
			}
		}
	}
	return errors.Join(errs...)
}
