package trial

import (
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

	"github.com/troupebench/troupe/trial/outcome"

	"github.com/troupebench/troupe/runtime"
)

// verify runs the task's tests/test.sh in the trial's container (step 9)
// and reads the reward it wrote.
func (r *run) verify(ctx context.Context) outcome.Outcome {
	r.phase("verifier", &r.res.Verifier)
	defer endPhase(&r.res.Verifier)
	broken := func(kind string, err error) outcome.Outcome {
		if ctx.Err() != nil {
			return outcome.Cancelled
		}
		r.fail(kind, err)
		return outcome.VerifierError
	}
	files, err := treeFiles(r.spec.Task.TestsDir, testsDir)
	if err != nil {
		return broken("VerifierError", err)
	}
	if err := r.env.Runtime.CopyIn(ctx, r.container, files); err != nil {
		return broken("VerifierError", fmt.Errorf("copy tests/ into the container: %w", err))
	}
	dir := filepath.Join(r.spec.Dir, "verifier")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return broken("VerifierError", err)
	}
	stdout, err := os.Create(filepath.Join(dir, "test-stdout.txt"))
	if err != nil {
		return broken("VerifierError", err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(dir, "test-stderr.txt"))
	if err != nil {
		return broken("VerifierError", err)
	}
	defer stderr.Close()
	var env []string
	for k, v := range r.spec.Task.VerifierEnv {
		env = append(env, k+"="+v)
	}
	// sh runs a test.sh without a shebang as a shell script; with one, exec
	// honours it.
	p, err := r.env.Runtime.Exec(ctx, r.container, runtime.ExecSpec{
		Cmd: []string{"/bin/sh", "-c", "exec " + testsDir + "/test.sh"}, Env: env, User: "0:0", WorkDir: r.workdir, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		return broken("VerifierError", fmt.Errorf("start tests/test.sh: %w", err))
	}
	limit := r.env.Limits.scale(r.spec.Task.VerifierTimeout)
	wctx, cancel := context.WithTimeout(ctx, limit)
	code, err := p.Wait(wctx)
	cancel()
	p.Close()
	if ctx.Err() != nil {
		return outcome.Cancelled
	}
	// /logs holds verifier/ and artifacts/: one copy brings both to the
	// trial folder, whatever the verifier did.
	copyErr := r.copyLogs(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return broken("VerifierTimeout", fmt.Errorf("tests/test.sh did not finish within %s", limit))
	case err != nil:
		return broken("VerifierError", fmt.Errorf("tests/test.sh: %w", err))
	case copyErr != nil:
		return broken("VerifierError", copyErr)
	}
	r.log.Info("verifier exited", "code", code)
	rewards, err := readRewards(dir)
	if err != nil {
		return broken("RewardFileError", fmt.Errorf("%w (tests/test.sh exited %d; its output is in verifier/test-stdout.txt)", err, code))
	}
	r.res.VerifierResult = &VerifierResult{Rewards: rewards}
	reward := mainReward(rewards)
	r.res.Reward = &reward
	if reward >= 1 {
		return outcome.Passed
	}
	return outcome.Failed
}

// copyLogs copies the container's /logs into the trial folder.
func (r *run) copyLogs(ctx context.Context) error {
	root, err := os.OpenRoot(r.spec.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	skipped, err := r.env.Runtime.CopyOut(ctx, r.container, "/logs", root, ".")
	if err != nil {
		return fmt.Errorf("copy /logs out: %w", err)
	}
	for _, s := range skipped {
		r.log.Warn("not copied out of /logs", "entry", s)
	}
	return nil
}

// readRewards reads reward.txt (one number) or reward.json (a flat object
// of numbers), as Harbor's verifiers write them.
func readRewards(dir string) (map[string]float64, error) {
	if data, err := os.ReadFile(filepath.Join(dir, "reward.txt")); err == nil {
		v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("reward.txt holds %q, not a number", shorten(string(data), 80))
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
		return nil, fmt.Errorf("reward.json is not a flat object of numbers: %q", shorten(string(data), 120))
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

func shorten(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
