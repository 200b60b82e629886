package job

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/troupebench/troupe/decide"
	"github.com/troupebench/troupe/internal/atomicfile"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
)

// ConditionStats counts one condition's trials in the job's result.json.
// Scored and pass rate are outcome's: the same as troupe compare's.
type ConditionStats struct {
	ManifestHash string `json:"manifest_sha256"`
	Trials       int    `json:"n_trials"`
	outcome.Tally
	Scored int `json:"n_scored"`
	// PassRate is passed over scored; null while nothing is scored.
	PassRate *float64 `json:"pass_rate"`
	// CostUSD is what every run of the condition's trials spent, infra
	// failures and runs redone after them included.
	CostUSD modelcall.USD `json:"cost_usd"`
}

// Stats are the job's running totals.
type Stats struct {
	Completed    int           `json:"n_completed_trials"`
	Errored      int           `json:"n_errored_trials"`
	Running      int           `json:"n_running_trials"`
	Pending      int           `json:"n_pending_trials"`
	Cancelled    int           `json:"n_cancelled_trials"`
	Retries      int           `json:"n_retries"`
	InputTokens  int64         `json:"n_input_tokens"`
	CachedTokens int64         `json:"n_cache_tokens"`
	OutputTokens int64         `json:"n_output_tokens"`
	CostUSD      modelcall.USD `json:"cost_usd"`
}

// Result is the job's result.json, rewritten as trials finish: Harbor's
// JobResult (src/harbor/models/job/result.py: id, started_at, updated_at,
// finished_at, n_total_trials, stats), with troupe's fields beside it.
type Result struct {
	// ID is Harbor's id of the job, a random UUID kept across the job's
	// runs (its trials' job_id); JobID is troupe's own, new each run
	// (<folder>-<unix time>): its containers' troupe.job label.
	ID         string                     `json:"id"`
	JobID      string                     `json:"troupe_job_id"`
	StartedAt  time.Time                  `json:"started_at"`
	UpdatedAt  time.Time                  `json:"updated_at"`
	FinishedAt *time.Time                 `json:"finished_at"`
	Total      int                        `json:"n_total_trials"`
	Stats      Stats                      `json:"stats"`
	Conditions map[string]*ConditionStats `json:"conditions"`
	// Trials maps each trial folder to its outcome.
	Trials map[string]outcome.Outcome `json:"trials"`
	// Sequential is a sequential job's tests and decisions
	// (sequential.go); nil for a fixed design.
	Sequential *decide.JobRecord `json:"sequential,omitempty"`
}

// Unmeasured counts the trials that ended unscored_infra: the harness
// failed them, not the team.
func (r *Result) Unmeasured() int {
	n := 0
	for _, c := range r.Conditions {
		n += c.UnscoredInfra
	}
	return n
}

// Done counts the trials that ended, with a verdict or an error.
func (r *Result) Done() int {
	return r.Stats.Completed + r.Stats.Errored
}

// count adds a trial's result to the job's totals.
func (r *runner) count(p *PlanTrial, res *trialdir.TrialResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.res.Stats
	c := r.res.Conditions[p.Condition]
	c.Trials++
	c.Add(res.Outcome)
	c.Scored = c.Tally.Scored()
	if rate := c.Tally.PassRate(); !math.IsNaN(rate) {
		c.PassRate = &rate
	}
	// Harbor's counts: completed trials have a verdict of the verifier;
	// errored ones have an exception (verifier_error among them).
	switch res.Outcome {
	case outcome.Passed, outcome.Failed:
		s.Completed++
	case outcome.Cancelled:
		s.Cancelled++
	default:
		s.Errored++
	}
	r.res.Trials[p.Name] = res.Outcome
	r.addSpend(c, res)
}

// spent counts what a run that is redone cost: it is paid for, though its
// outcome is replaced by the retry's.
func (r *runner) spent(p *PlanTrial, res *trialdir.TrialResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addSpend(r.res.Conditions[p.Condition], res)
}

// addSpend adds a run's tokens and cost to the job's and the condition's
// totals; r.mu is held.
func (r *runner) addSpend(c *ConditionStats, res *trialdir.TrialResult) {
	s := &r.res.Stats
	c.CostUSD += res.AgentResult.CostUSD
	s.InputTokens += res.AgentResult.NInputTokens
	s.CachedTokens += res.AgentResult.NCacheTokens
	s.OutputTokens += res.AgentResult.NOutputTokens
	s.CostUSD += res.AgentResult.CostUSD
}

// write rewrites the job's result.json.
func (r *runner) write() {
	// One writer at a time, each with a snapshot taken under its turn: the
	// file never goes back to an older snapshot.
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	r.mu.Lock()
	r.res.UpdatedAt = time.Now()
	data, err := json.Marshal(r.res) // a snapshot, taken under the lock
	r.mu.Unlock()
	if err == nil {
		var snapshot Result
		if err = json.Unmarshal(data, &snapshot); err == nil {
			err = atomicfile.WriteJSON(filepath.Join(r.plan.Dir, trialdir.JobResult), &snapshot)
		}
	}
	if err != nil {
		r.log.Error("write the job's result.json", "err", err.Error())
	}
}

// readJobUUID is the id of the job result.json in dir holds, when it is a
// UUID; "" when there is none, or of an older troupe's (its own id).
func readJobUUID(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, trialdir.JobResult))
	if err != nil || len(data) > trialdir.MaxResult {
		return ""
	}
	var res Result
	if json.Unmarshal(data, &res) != nil || !trialdir.IsUUID(res.ID) {
		return ""
	}
	return res.ID
}
