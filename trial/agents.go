package trial

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/relay"
	"github.com/troupebench/troupe/runtime"
)

// Steps 4 and 5 (docs/run.md): the agents launched, and ready.

// maxRounds is the contract's round limit: the manifest's budget.max_calls,
// as the original system used it (0: the agent's default).
func maxRounds(b manifest.Budget) int {
	if b.MaxCalls == nil {
		return 0
	}
	return int(*b.MaxCalls)
}

// generation is the contract's form of a class's generation settings.
func generation(g manifest.Generation) contract.Generation {
	out := contract.Generation{ThinkingEffort: g.ThinkingEffort, Extra: g.Extra}
	for _, f := range []struct {
		from *int64
		into *int64
	}{{g.MaxOutputTokens, &out.MaxOutputTokens}, {g.ContextWindowTokens, &out.ContextWindowTokens}, {g.CompactAtPercent, &out.CompactAtPercent}, {g.CompactAtTokens, &out.CompactAtTokens}} {
		if f.from != nil {
			*f.into = *f.from
		}
	}
	return out
}

// launch starts one exec per agent, with the stack contract's environment.
func (r *run) launch(ctx context.Context) error {
	r.deadline = time.Now().Add(r.agentTimeout())
	r.exits = make(chan int, len(r.agents))
	// A multi-step trial launches its team once a step, with new channels:
	// each watcher keeps its own launch's.
	exits, stop := r.exits, r.stop
	for i, ar := range r.agents {
		cmd, env := ar.stack.Launch(contract.Values{
			AgentID: ar.ID, RelayURL: relay.ContainerURL, Channel: r.id, LLMBaseURL: llm.ContainerURL + "/v1",
			Model: ar.Endpoint, Workdir: r.workdir, Deadline: r.deadline,
			MaxRounds: maxRounds(ar.Budget), Generation: generation(ar.Generation),
			MCPServers: r.spec.Task.MCPServers, SkillsDir: r.spec.Task.SkillsDir,
		}, ar.sk.Reveal(), r.gw.Token(ar.ID).Reveal())
		env = append(env, proxyEnv(r.agentNet())...)
		user := fmt.Sprintf("%d:%d", ar.uid, ar.gid)
		// Not ctx: a cancelled job must not cut an exec half-started (the
		// sweep would then find runc's init, and the exec never end). The
		// agents are stopped by the sweep, like on any other ending.
		p, err := r.container.Exec(context.WithoutCancel(ctx), runtime.ExecSpec{
			Cmd: cmd, Env: env, User: user, WorkDir: r.workdir, Stdout: ar.stdout, Stderr: ar.stderr,
		})
		if err != nil {
			return fmt.Errorf("start agent %s: %w", ar.ID, err)
		}
		ar.proc = p
		r.watchers.Go(func() {
			select {
			case <-p.Done():
				exits <- i
			case <-stop:
			}
		})
	}
	r.log.Info("agents launched", "count", len(r.agents), "deadline", r.deadline.Format(time.RFC3339))
	return nil
}

// exited records an agent's end.
func (r *run) exited(i int) *agentRun {
	ar := r.agents[i]
	ar.exited = true
	code, err := ar.proc.Wait(context.Background())
	if err == nil {
		r.res.Agents[i].ExitCode = &code
	}
	r.log.Info("agent exited", "agent", ar.ID, "code", code)
	return ar
}

// waitReady waits until every agent has authenticated and subscribed.
func (r *run) waitReady(ctx context.Context) error {
	limit := r.env.Limits.scale(r.env.Limits.Ready)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		_, missing, changed := r.ch.Readiness()
		if len(missing) == 0 {
			r.log.Info("agents ready")
			return nil
		}
		select {
		case <-changed:
		case i := <-r.exits:
			ar := r.exited(i)
			return fmt.Errorf("agent %s exited before it was ready; its last words: %s", ar.ID, lastWords(ar.stderr.Name(), 600))
		case <-timer.C:
			return fmt.Errorf("agents %s were not ready within %s (authenticated with a live subscription to the channel)", strings.Join(missing, ", "), limit)
		case <-r.tun.Done():
			return fmt.Errorf("the tunnel ended: %s", r.tun.Stderr())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
