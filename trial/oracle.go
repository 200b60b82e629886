package trial

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/manifest"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/trialdir"
)

// solutionDir is where the oracle's solution/ goes, as in Harbor.
const solutionDir = "/solution"

// The oracle (troupe run --oracle, Harbor's oracle agent) runs each task's
// solution/solve.sh, as the task's agent user, in place of a team; then the
// task's verifier, as for any trial (Spec.Oracle). A task set whose oracle
// does not pass everywhere has broken tasks.

// OracleManifestPath stands for the oracle's manifest, which has no file:
// a result's manifest_path says a trial ran the oracle.
const OracleManifestPath = "(oracle)"

// OracleTeam is the oracle's roster: its manifest (manifest.Oracle), no
// agents.
func OracleTeam() *manifest.Team {
	return &manifest.Team{Manifest: manifest.Oracle()}
}

// provisionOracle is provision for the oracle: no keys, channel or tokens;
// the solution's environment resolved; the files it writes opened.
func (r *run) provisionOracle() error {
	if !r.spec.Task.Solved() {
		return fmt.Errorf("task %s has no solution/solve.sh (for a multi-step task, one for each step: steps/<name>/solution/solve.sh, else solution/solve.sh): the oracle has nothing to run", r.spec.Task.Dir)
	}
	env, fromHost, err := r.spec.Task.SolutionEnv(nil)
	if err != nil {
		return err
	}
	r.solutionEnv = env
	var minted []secret.Secret
	for _, m := range []map[string]secret.Secret{r.spec.Task.FromHost, fromHost} {
		for _, v := range m {
			minted = append(minted, v)
		}
	}
	r.armSinks(minted)
	ar := &agentRun{Agent: manifest.Agent{ID: manifest.OracleCondition, Kind: manifest.OracleCondition, Role: manifest.OracleCondition}}
	if err := os.MkdirAll(filepath.Join(r.spec.Dir, filepath.FromSlash(trialdir.Agent(ar.ID))), 0o755); err != nil {
		return err
	}
	bounds := r.env.bounds()
	if ar.stdout, err = r.openSink(trialdir.Stdout(ar.ID), bounds.AgentOutput); err != nil {
		return err
	}
	if ar.stderr, err = r.openSink(trialdir.Stderr(ar.ID), bounds.AgentOutput); err != nil {
		return err
	}
	r.agents = []*agentRun{ar}
	r.res.Agents = []trialdir.AgentRecord{{ID: ar.ID, ClassID: ar.ID, Kind: string(ar.Kind), Role: ar.Role}}
	return nil
}

// solutionFiles are the task's solution/, for /solution.
func (r *run) solutionFiles() ([]runtime.File, error) {
	return treeFiles(r.spec.Task.SolutionDir, solutionDir)
}

// launchOracle runs solve.sh as the task's agent user (the image's default
// user when the task names none), in the working folder, with [solution]
// env, as Harbor runs it (harborScript).
func (r *run) launchOracle(ctx context.Context) error {
	r.deadline = time.Now().Add(r.agentTimeout())
	r.exits = make(chan int, 1)
	exits, stop := r.exits, r.stop
	ar := r.agents[0]
	user := r.img.User
	if r.taskAgent != nil {
		user = r.taskAgent.Spec()
		r.res.Agents[0].UID = r.taskAgent.UID
	}
	env := append(envList(r.solutionEnv), proxyEnv(r.agentNet())...)
	p, err := r.container.Exec(context.WithoutCancel(ctx), runtime.ExecSpec{
		Cmd: harborScript(solutionDir + "/solve.sh"), Env: env, User: user, WorkDir: r.workdir, Stdout: ar.stdout, Stderr: ar.stderr,
	})
	if err != nil {
		return fmt.Errorf("start solution/solve.sh: %w", err)
	}
	ar.proc = p
	r.watchers.Go(func() {
		select {
		case <-p.Done():
			exits <- 0
		case <-stop:
		}
	})
	r.log.Info("oracle launched", "user", user, "deadline", r.deadline.Format(time.RFC3339))
	return nil
}

// watchOracle waits for solve.sh to end, or the deadline.
func (r *run) watchOracle(ctx context.Context) Reason {
	timer := time.NewTimer(time.Until(r.deadline))
	defer timer.Stop()
	select {
	case i := <-r.exits:
		r.exited(i)
		return AgentsExited
	case <-timer.C:
		r.log.Info("deadline")
		return Deadline
	case <-r.tun.Done():
		r.fail(ErrTunnel, fmt.Errorf("the tunnel ended during the trial: %s", r.tun.Stderr()))
		return InfraError
	case <-ctx.Done():
		return Cancelled
	}
}
