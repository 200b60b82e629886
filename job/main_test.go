package job

import (
	"os"
	"testing"

	"github.com/troupebench/troupe/runtime/docker"
	"github.com/troupebench/troupe/trial"
	"github.com/troupebench/troupe/trial/trialtest"
)

// The job tests run real jobs of real trials, on trialtest's scaffolding:
// the Docker Engine, troupe's static binary, the embedded relay and the
// gateway playing mock scenarios, the manifests and tasks of
// trial/testdata.

var (
	testRT *docker.Docker
	runID  string
)

// A job ends its jobs on the Docker backend: the job network goes with
// the job, not with the process.
var _ jobEnder = (*docker.Docker)(nil)

var (
	team      = trialtest.Team
	loadTask  = trialtest.Task
	noSecrets = trialtest.NoSecrets
	token     = trialtest.GatewayToken
	testdata  = trialtest.Testdata
)

const helloWorld = "../examples/tasks/hello-world"

func TestMain(m *testing.M) {
	os.Exit(trialtest.Main(m, func(d *docker.Docker, id string) { testRT, runID = d, id }))
}

// testEnv is a job environment for one test.
func testEnv(t *testing.T) *trial.Env {
	p := trialtest.Open(t, testRT, runID, nil)
	return &trial.Env{Runtime: p.Runtime, Relay: p.Relay, Gateway: p.Gateway, Binary: p.Binary, JobID: p.JobID, Version: "test", Limits: trial.DefaultLimits}
}

func cond(t *testing.T, path string) Condition {
	return Condition{Path: path, Team: team(t, path)}
}
