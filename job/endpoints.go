package job

import (
	"context"
	"errors"
	"fmt"

	"github.com/troupebench/troupe/llm"
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
		t.Close(context.WithoutCancel(ctx))
	}
	return errors.Join(errs...)
}
