package trial

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
)

// resolveUsers decides who the agents and the verifier run as, from the
// container's own accounts, before any file of theirs is placed:
//
//   - a task that names [agent] user gets it for every agent (Harbor runs
//     its agent as that user, and such a task's tests may check it); the
//     agents then share one uid, and the result says identities were not
//     isolated;
//   - otherwise each agent has its own uid (agent_user: isolated) or root;
//   - the verifier runs as [verifier] user, else as the image's USER, as in
//     Harbor.
func (r *run) resolveUsers(ctx context.Context) error {
	task := r.spec.Task
	if r.spec.Oracle {
		r.res.AgentUser, r.res.IdentitiesIsolated = "oracle:"+cmp.Or(task.AgentUser, r.img.User, "root"), false
	}
	if task.AgentUser != "" {
		u, err := r.lookupUser(ctx, task.AgentUser)
		if err != nil {
			return fmt.Errorf("[agent] user: %w", err)
		}
		r.taskAgent = &u
		for i, ar := range r.agents {
			ar.uid, ar.gid = u.UID, u.GID
			r.res.Agents[i].UID = u.UID
		}
		if !r.spec.Oracle {
			r.res.AgentUser, r.res.IdentitiesIsolated = "task:"+task.AgentUser, false
		}
		r.log.Info("agents run as the task's user", "user", task.AgentUser, "uid", u.UID, "gid", u.GID)
	}
	spec := cmp.Or(task.VerifierUser, r.img.User)
	u, err := r.lookupUser(ctx, spec)
	if err != nil {
		which := "[verifier] user"
		if task.VerifierUser == "" {
			which = "the image's USER"
		}
		return fmt.Errorf("%s: %w", which, err)
	}
	r.verifier = u
	return nil
}

// lookupUser resolves a user in the container (inside.LookupUser).
func (r *run) lookupUser(ctx context.Context, spec string) (inside.User, error) {
	if spec == "" {
		return inside.User{Name: "root"}, nil
	}
	cctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(callTimeout))
	defer cancel()
	out, err := r.callInside(cctx, "user", spec, nil)
	if err != nil {
		return inside.User{}, err
	}
	var u inside.User
	if err := json.Unmarshal(out, &u); err != nil {
		return inside.User{}, fmt.Errorf("user %s: %w", spec, err)
	}
	return u, nil
}

// errUnhealthy is a healthcheck that failed: the environment is not what
// the task needs, and no agent starts in it.
var errUnhealthy = errors.New("the task's healthcheck failed")

// healthcheck runs [environment.healthcheck] before the agents start, as
// Harbor does: as the container's default user, in the working folder; it
// passes at its first exit 0; failures within the start period do not
// count; after it, Retries failures in a row fail the trial. The pauses
// are the task's own intervals.
func (r *run) healthcheck(ctx context.Context) error {
	hc := r.spec.Task.Healthcheck
	if hc == nil {
		return nil
	}
	start := time.Now()
	failures := 0
	for attempt := 1; ; attempt++ {
		code, out, err := r.probe(ctx, hc.Command, r.env.Limits.scale(hc.Timeout))
		if err == nil && code == 0 {
			r.log.Info("healthcheck passed", "attempts", attempt, "after", time.Since(start).Round(time.Millisecond).String())
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		why := fmt.Sprintf("exit %d: %s", code, clip.Tail(strings.TrimSpace(out), 300))
		if err != nil {
			why = err.Error()
		}
		wait := hc.Interval
		if time.Since(start) < hc.StartPeriod {
			wait = hc.StartInterval // the start period's failures do not count
		} else if failures++; failures >= hc.Retries {
			return fmt.Errorf("%w: %q failed %d times in a row after the start period (%s); the last said %s", errUnhealthy, hc.Command, failures, hc.StartPeriod, why)
		}
		r.log.Info("healthcheck failed", "attempt", attempt, "why", why)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// probe runs a shell command in the container as its default user, in the
// working folder, within limit; it returns the exit code and the output.
func (r *run) probe(ctx context.Context, command string, limit time.Duration) (int, string, error) {
	var out syncbuf.Buffer
	p, err := r.container.Exec(ctx, runtime.ExecSpec{
		Cmd: []string{"/bin/sh", "-c", command}, Env: proxyEnv(r.agentNet()), WorkDir: r.workdir, Stdout: &out, Stderr: &out,
	})
	if err != nil {
		return -1, "", err
	}
	defer p.Close()
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	code, err := p.Wait(wctx)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return -1, out.String(), fmt.Errorf("did not finish within %s", limit)
	}
	return code, out.String(), err
}
