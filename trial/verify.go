package trial

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/trial/outcome"

	"github.com/troupebench/troupe/runtime"
)

// verify runs the task's tests/test.sh in the trial's container (step 9)
// and reads the reward it wrote. ctx is the trial's; cctx the teardown's,
// for closing the services before the verifier starts.
func (r *run) verify(ctx, cctx context.Context) outcome.Outcome {
	r.phase("verifier", &r.res.Verifier)
	defer endPhase(&r.res.Verifier)
	broken := func(kind ErrorKind, err error, result outcome.Outcome) outcome.Outcome {
		if ctx.Err() != nil {
			return outcome.Cancelled
		}
		r.fail(kind, err)
		return result
	}
	files, err := treeFiles(r.spec.Task.TestsDir, testsDir)
	if err != nil {
		return broken(ErrVerifier, err, outcome.VerifierError)
	}
	if err := r.stageVerifier(ctx, files); err != nil {
		return broken(ErrContainer, err, outcome.UnscoredInfra)
	}
	// Nothing in the container may reach the relay or the gateway while
	// the verifier runs.
	r.closeServices(cctx)
	bounds := r.env.bounds()
	if err := os.MkdirAll(filepath.Join(r.spec.Dir, "verifier"), 0o755); err != nil {
		return broken(ErrVerifier, err, outcome.VerifierError)
	}
	stdout, err := r.openSink("verifier/test-stdout.txt", bounds.VerifierOutput)
	if err != nil {
		return broken(ErrVerifier, err, outcome.VerifierError)
	}
	defer stdout.Close()
	stderr, err := r.openSink("verifier/test-stderr.txt", bounds.VerifierOutput)
	if err != nil {
		return broken(ErrVerifier, err, outcome.VerifierError)
	}
	defer stderr.Close()
	var env []string
	for k, v := range r.spec.Task.VerifierEnv {
		env = append(env, k+"="+v)
	}
	// sh runs a test.sh without a shebang as a shell script; with one, exec
	// honours it.
	p, err := r.env.Runtime.Exec(ctx, r.container, runtime.ExecSpec{
		Cmd: []string{"/bin/sh", "-c", "exec " + testsDir + "/test.sh"}, Env: env, User: verifierUser, WorkDir: r.workdir, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		return broken(ErrVerifier, fmt.Errorf("start tests/test.sh: %w", err), outcome.VerifierError)
	}
	limit := r.env.Limits.scale(r.spec.Task.VerifierTimeout)
	wctx, cancel := context.WithTimeout(ctx, limit)
	code, err := p.Wait(wctx)
	cancel()
	p.Close()
	if ctx.Err() != nil {
		return outcome.Cancelled
	}
	copyErr := r.copyLogs(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return broken(ErrVerifierTimeout, fmt.Errorf("tests/test.sh did not finish within %s", limit), outcome.VerifierError)
	case err != nil:
		return broken(ErrVerifier, fmt.Errorf("tests/test.sh: %w", err), outcome.VerifierError)
	case copyErr != nil:
		return broken(ErrVerifier, copyErr, outcome.VerifierError)
	}
	r.log.Info("verifier exited", "code", code)
	rewards, err := readRewards(filepath.Join(r.spec.Dir, "verifier"))
	if err != nil {
		return broken(ErrRewardFile, fmt.Errorf("%w (tests/test.sh exited %d; its output is in verifier/test-stdout.txt)", err, code), outcome.VerifierError)
	}
	r.res.VerifierResult = &VerifierResult{Rewards: rewards}
	reward := mainReward(rewards)
	r.res.Reward = &reward
	if reward >= 1 {
		return outcome.Passed
	}
	return outcome.Failed
}

// verifierUser runs tests/test.sh, and owns /logs/verifier.
const (
	verifierUser = "0:0"
	verifierUID  = 0
)

// stageVerifier empties /tests and /logs/verifier, whatever the agents left
// there (a reward written in advance, a link to a folder of theirs), gives
// /logs/verifier to the verifier, and unpacks the task's tests/. What was
// removed goes to trial.log and the result.
func (r *run) stageVerifier(ctx context.Context, tests []runtime.File) error {
	type dir struct {
		Dir  string      `json:"dir"`
		UID  int         `json:"uid"`
		GID  int         `json:"gid"`
		Mode fs.FileMode `json:"mode"`
	}
	arg, _ := json.Marshal([]dir{{testsDir, 0, 0, 0o755}, {verifierLogs, verifierUID, verifierUID, 0o755}})
	var tar bytes.Buffer
	if err := runtime.WriteTar(&tar, tests); err != nil {
		return fmt.Errorf("stage the verifier: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(callTimeout))
	defer cancel()
	out, err := r.callInside(cctx, "reset", string(arg), tar.Bytes())
	if err != nil {
		return fmt.Errorf("stage the verifier: %w", err)
	}
	var answer struct {
		Removed []string `json:"removed"`
	}
	if err := json.Unmarshal(out, &answer); err != nil {
		return fmt.Errorf("stage the verifier: %w", err)
	}
	for _, e := range answer.Removed {
		r.log.Warn("removed before the verifier ran: the agents left it", "entry", e)
	}
	r.res.RemovedBeforeVerifier = answer.Removed
	return nil
}

// copyLogs copies what the verifier wrote (/logs/verifier) and what the
// agents left as artifacts (/logs/artifacts) into the trial folder, within
// the bounds, and scrubs the trial's secrets from both.
func (r *run) copyLogs(ctx context.Context) error {
	root, err := os.OpenRoot(r.spec.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	budget := r.env.bounds().Logs
	for _, d := range []string{"verifier", "artifacts"} {
		dir := filepath.Join(r.spec.Dir, d)
		before := dirSize(dir) // verifier/ holds troupe's capture of its output
		skipped, err := r.env.Runtime.CopyOut(ctx, r.container, path.Join("/logs", d), root, d, budget)
		if err != nil {
			return fmt.Errorf("copy /logs/%s out: %w", d, err)
		}
		for _, s := range skipped {
			r.log.Warn("not copied out of /logs", "entry", s)
		}
		if budget -= dirSize(dir) - before; budget <= 0 {
			budget = 1 // the next copy takes nothing more
		}
		if err := scrubTree(dir, r.secrets); err != nil {
			r.cleanupError("scrub "+d, err)
		}
	}
	return nil
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// readRewards reads reward.txt (one number) or reward.json (a flat object
// of numbers), as Harbor's verifiers write them.
func readRewards(dir string) (map[string]float64, error) {
	if data, err := os.ReadFile(filepath.Join(dir, "reward.txt")); err == nil {
		v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("reward.txt holds %q, not a number", clip.Head(string(data), 80))
		}
		return map[string]float64{"reward": v}, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, "reward.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("the verifier wrote neither /logs/verifier/reward.txt nor reward.json")
	}
	if err != nil {
		return nil, err
	}
	var rewards map[string]float64
	if err := json.Unmarshal(data, &rewards); err != nil || len(rewards) == 0 {
		return nil, fmt.Errorf("reward.json is not a flat object of numbers: %q", clip.Head(string(data), 120))
	}
	return rewards, nil
}

// mainReward is the trial's score: the "reward" key, else the mean of all.
// A trial passes when it is at least 1.
func mainReward(rewards map[string]float64) float64 {
	if v, ok := rewards["reward"]; ok {
		return v
	}
	sum := 0.0
	for _, v := range rewards {
		sum += v
	}
	return sum / float64(len(rewards))
}

// treeFiles lists a host folder's files for CopyIn under dst, keeping their
// modes; shell scripts are made executable.
func treeFiles(src, dst string) ([]runtime.File, error) {
	var files []runtime.File
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := path.Join(dst, filepath.ToSlash(rel))
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			files = append(files, runtime.File{Path: target, Mode: fs.ModeDir | 0o755})
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			mode := info.Mode().Perm() | 0o444
			if strings.HasSuffix(p, ".sh") || mode&0o100 != 0 {
				mode |= 0o555
			}
			files = append(files, runtime.File{Path: target, Data: data, Mode: mode})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", src, err)
	}
	return files, nil
}
