package trial

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/task"
	"github.com/troupebench/troupe/task/taskfs"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// verification is one run of a verifier: the folders staged in /tests,
// in order (a later one's files over an earlier one's), its limit, its
// env and user, and what closes the services before it runs.
type verification struct {
	tests         []string
	limit         time.Duration
	env           map[string]string
	user          inside.User
	closeServices func()
	timing        *trialdir.Timing
}

// verify runs the task's tests/test.sh in the trial's container (step 10)
// and reads the reward it wrote. ctx is the trial's; cctx the teardown's,
// for closing the services before the verifier starts.
func (r *run) verify(ctx, cctx context.Context) outcome.Outcome {
	return r.runVerifier(ctx, verification{
		tests: []string{r.spec.Task.TestsDir}, limit: r.env.Limits.scale(r.spec.Task.VerifierTimeout), env: r.spec.Task.VerifierEnv, user: r.verifier,
		closeServices: func() { r.closeServices(cctx) }, timing: &r.res.Verifier,
	})
}

// runVerifier runs a verification: tests/test.sh staged from v.tests, as
// v.user, and the reward it wrote read into the result.
func (r *run) runVerifier(ctx context.Context, v verification) outcome.Outcome {
	r.phase("verifier", v.timing)
	defer endPhase(v.timing)
	broken := func(kind ErrorKind, err error, result outcome.Outcome) outcome.Outcome {
		if ctx.Err() != nil {
			return outcome.Cancelled
		}
		r.fail(kind, err)
		return result
	}
	// Before troupe stages the tests: what differs from the image then is
	// the agents' doing.
	r.checkSystem(ctx)
	var files []runtime.File
	for _, dir := range v.tests {
		tree, err := treeFiles(dir, testsDir)
		if err != nil {
			return broken(ErrVerifier, err, outcome.VerifierError)
		}
		files = append(files, tree...)
	}
	if err := r.stageVerifier(ctx, files, v.user); err != nil {
		return broken(ErrContainer, err, outcome.UnscoredInfra)
	}
	// Nothing in the container may reach the relay or the gateway while
	// the verifier runs.
	v.closeServices()
	if err := r.verifierNetwork(ctx); err != nil {
		return broken(ErrContainer, err, outcome.UnscoredInfra)
	}
	bounds := r.env.bounds()
	if err := os.MkdirAll(filepath.Join(r.spec.Dir, trialdir.Verifier), 0o755); err != nil {
		return broken(ErrVerifier, err, outcome.VerifierError)
	}
	stdout, err := r.openSink(trialdir.VerifierStdout, bounds.VerifierOutput)
	if err != nil {
		return broken(ErrVerifier, err, outcome.VerifierError)
	}
	defer stdout.Close()
	stderr, err := r.openSink(trialdir.VerifierStderr, bounds.VerifierOutput)
	if err != nil {
		return broken(ErrVerifier, err, outcome.VerifierError)
	}
	defer stderr.Close()
	env := append(envList(v.env), proxyEnv(r.verifierNet())...)
	p, err := r.container.Exec(ctx, runtime.ExecSpec{
		Cmd: harborScript(testsDir + "/test.sh"), Env: env, User: v.user.Spec(), WorkDir: r.workdir, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		return broken(ErrVerifier, fmt.Errorf("start tests/test.sh: %w", err), outcome.VerifierError)
	}
	limit := v.limit
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
	rewards, err := readRewards(r.spec.Dir)
	if err != nil {
		return broken(ErrRewardFile, fmt.Errorf("%w (tests/test.sh exited %d; its output is in verifier/test-stdout.txt)", err, code), outcome.VerifierError)
	}
	r.res.VerifierResult = &trialdir.VerifierResult{Rewards: rewards}
	reward := mainReward(rewards)
	r.res.Reward = &reward
	if reward >= 1 {
		return outcome.Passed
	}
	return outcome.Failed
}

// stageVerifier empties /tests and /logs/verifier, whatever the agents left
// there (a reward written in advance, a link to a folder of theirs), gives
// /logs/verifier to the verifier, and unpacks the task's tests/. What was
// removed goes to trial.log and the result.
func (r *run) stageVerifier(ctx context.Context, tests []runtime.File, verifier inside.User) error {
	type dir struct {
		Dir  string      `json:"dir"`
		UID  int         `json:"uid"`
		GID  int         `json:"gid"`
		Mode fs.FileMode `json:"mode"`
	}
	arg, _ := json.Marshal([]dir{{testsDir, 0, 0, 0o755}, {verifierLogs, verifier.UID, verifier.GID, 0o755}})
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

// copyLogs copies what the verifier wrote (/logs/verifier), what the agents
// left as artifacts (/logs/artifacts) and the task's own artifacts into the
// trial folder, within the bounds, and scrubs the trial's secrets from
// them all.
func (r *run) copyLogs(ctx context.Context) error {
	root, err := os.OpenRoot(r.spec.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	budget := r.env.bounds().Logs
	// copyOut copies src to dst within what is left of the budget and says
	// whether anything was skipped. What the agents could write (their
	// artifacts) is copied with their rights (copyOutAs), what the
	// verifier wrote by the engine.
	copyOut := func(src, dst string, asAgents bool) (bool, error) {
		full := filepath.Join(r.spec.Dir, filepath.FromSlash(dst))
		before := dirSize(full) // verifier/ holds troupe's capture of its output
		var skipped []string
		var err error
		if asAgents {
			skipped, err = r.copyOutAs(ctx, src, root, dst, budget)
		} else {
			skipped, err = r.container.CopyOut(ctx, src, root, dst, budget)
		}
		if err != nil {
			return false, fmt.Errorf("copy %s out: %w", src, err)
		}
		for _, s := range skipped {
			r.log.Warn("not copied out", "from", src, "entry", s)
		}
		if budget -= dirSize(full) - before; budget <= 0 {
			budget = 1 // the next copy takes nothing more
		}
		return len(skipped) > 0, nil
	}
	for _, d := range []struct{ from, to string }{{verifierLogs, trialdir.Verifier}, {artifactsDir, trialdir.Artifacts}} {
		if _, err := copyOut(d.from, d.to, d.to == trialdir.Artifacts); err != nil {
			return err
		}
	}
	if arts := r.spec.Task.Artifacts; len(arts) > 0 {
		r.collectArtifacts(root, arts, func(src, dst string) (bool, error) { return copyOut(src, dst, true) })
	}
	for _, d := range []string{trialdir.Verifier, trialdir.Artifacts} {
		if err := scrubTree(filepath.Join(r.spec.Dir, d), r.secrets); err != nil {
			r.cleanupError("scrub "+d, err)
		}
	}
	return nil
}

// artifactRecord is an entry of artifacts/manifest.json, as Harbor writes
// it.
type artifactRecord struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Status      string `json:"status"` // ok, partial, failed
	Error       string `json:"error,omitempty"`
}

// collectArtifacts copies the task's artifacts (task.toml's artifacts) into
// artifacts/<destination>, drops what their exclude patterns name, and
// writes artifacts/manifest.json. Like Harbor, a path that cannot be
// collected is recorded, never the trial's failure.
func (r *run) collectArtifacts(root *os.Root, arts []task.Artifact, copyOut func(src, dst string) (bool, error)) {
	var records []artifactRecord
	for _, a := range arts {
		dst := path.Join(trialdir.Artifacts, cmp.Or(a.Destination, path.Base(a.Source)))
		rec := artifactRecord{Source: a.Source, Destination: dst, Status: "ok"}
		partial, err := copyOut(a.Source, dst)
		switch {
		case err != nil:
			rec.Status, rec.Error = "failed", err.Error()
		case partial:
			rec.Status = "partial"
		}
		if err == nil && len(a.Exclude) > 0 {
			excludeFrom(filepath.Join(r.spec.Dir, filepath.FromSlash(dst)), a.Exclude)
		}
		records = append(records, rec)
	}
	data, _ := json.MarshalIndent(records, "", "  ")
	if err := root.WriteFile(trialdir.ArtifactsManifest, append(data, '\n'), 0o644); err != nil {
		r.cleanupError("write "+trialdir.ArtifactsManifest, err)
	}
}

// excludeFrom removes what the patterns name under dir: a pattern matches a
// file's or folder's name, or its path below dir, as tar --exclude does.
func excludeFrom(dir string, patterns []string) {
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		for _, pat := range patterns {
			if m, _ := path.Match(pat, e.Name()); m || matchPath(pat, filepath.ToSlash(rel)) {
				os.RemoveAll(p)
				if e.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		return nil
	})
}

func matchPath(pattern, rel string) bool {
	m, _ := path.Match(pattern, rel)
	return m
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

// readRewards reads, in the trial folder dir, reward.txt (one number) or
// reward.json (a flat object of numbers), as Harbor's verifiers write
// them.
func readRewards(dir string) (map[string]float64, error) {
	if data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(trialdir.RewardText))); err == nil {
		v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("reward.txt holds %q, not a number", clip.Head(string(data), 80))
		}
		return map[string]float64{"reward": v}, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(trialdir.RewardJSON)))
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
	// Read beneath src only (task/taskfs): a file swapped for a link out
	// of the task since it was loaded is refused, not followed.
	d, err := taskfs.Open(src)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", src, err)
	}
	defer d.Close()
	var files []runtime.File
	err = d.WalkDir(".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := path.Join(dst, p)
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			files = append(files, runtime.File{Path: target, Mode: fs.ModeDir | 0o755})
		case info.Mode().IsRegular():
			data, err := d.ReadFile(p, 0)
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

// copyOutAs copies src out of the container with the agents' rights: troupe
// packs it inside (troupe call pack-as) with only what one of the agents
// could have read itself, and through no link an agent made on the way, so
// an artifact path an agent turned into a link to a root-only file copies
// nothing of it. The tar streams into the trial folder as the engine's copy
// does, within limit.
func (r *run) copyOutAs(ctx context.Context, src string, root *os.Root, dst string, limit int64) ([]string, error) {
	arg, err := json.Marshal(struct {
		Src string        `json:"src"`
		As  []inside.Cred `json:"as"`
	}{src, r.agentCreds()})
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	var errOut bytes.Buffer
	p, err := r.container.Exec(ctx, runtime.ExecSpec{
		Cmd: []string{runtime.BinaryPath, "call", "pack-as", string(arg)}, User: "0:0", Stdout: pw, Stderr: &errOut,
	})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	type extracted struct {
		skipped []string
		err     error
	}
	done := make(chan extracted, 1)
	go func() {
		skipped, err := runtime.ExtractTar(pr, src, root, dst, limit)
		io.Copy(io.Discard, pr) // what a failed extraction left, so the exec ends
		done <- extracted{skipped, err}
	}()
	code, werr := p.Wait(ctx)
	pw.Close()
	x := <-done
	switch {
	case code > 0:
		return x.skipped, fmt.Errorf("troupe call pack-as: exit %d: %s", code, clip.Head(strings.TrimSpace(errOut.String()), 500))
	case werr != nil:
		return x.skipped, werr
	}
	return x.skipped, x.err
}

// agentCreds are the identities the trial's agents ran as; root's when
// they ran as root or when none ran (the oracle's solution is the task's).
func (r *run) agentCreds() []inside.Cred {
	if r.spec.Oracle || len(r.agents) == 0 {
		return []inside.Cred{{UID: 0}}
	}
	var creds []inside.Cred
	seen := map[int]bool{}
	for _, ar := range r.agents {
		if !seen[ar.uid] {
			seen[ar.uid] = true
			creds = append(creds, inside.Cred{UID: ar.uid, GIDs: []int{ar.gid}})
		}
	}
	return creds
}

// harborScript is how Harbor runs a task's script (tests/test.sh,
// solution/solve.sh): bash FILE, whatever its first line says, so a
// script without a shebang may use bash's syntax and a shebang below
// line 1 is a comment. An image without bash runs it as its first line
// says (sh when it says nothing), and the script's stderr says so.
func harborScript(path string) []string {
	return []string{"/bin/sh", "-c", `if command -v bash >/dev/null 2>&1; then exec bash "$0"; fi
echo "troupe: this image has no bash, which Harbor runs $0 with: it runs as its first line says, or under sh" >&2
exec "$0"`, path}
}
