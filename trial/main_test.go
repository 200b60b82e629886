package trial

import (
	"os"
	"testing"

	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/relay"
	"github.com/troupebench/troupe/runtime/docker"
	"github.com/troupebench/troupe/trial/trialtest"
)

// The trial tests run real trials: the Docker Engine, the busybox image
// (bash .ci/seed-images), troupe's static binary built once, the embedded
// relay and the gateway playing mock scenarios. The scaffolding is
// trialtest's, which the job's tests share; these are its names here.

var (
	testRT *docker.Docker
	runID  string
)

var (
	testBinary = trialtest.Binary
	team       = trialtest.Team
	loadTask   = trialtest.Task
	fileDigest = trialtest.FileDigest
	plainStack = trialtest.PlainStack
	noSecrets  = trialtest.NoSecrets
	readPlain  = trialtest.ReadPlain
	token      = trialtest.GatewayToken
)

func TestMain(m *testing.M) {
	os.Exit(trialtest.Main(m, func(d *docker.Docker, id string) { testRT, runID = d, id }))
}

// services opens a relay and a gateway for one test's job.
func services(t testing.TB) (*relay.Relay, *llm.Gateway) {
	t.Helper()
	return trialtest.Services(t, nil)
}

// testEnv is a job environment for one test.
func testEnv(t *testing.T) *Env {
	return testEnvWith(t, nil)
}

// testEnvWith is a job environment whose gateway has endpoints.
func testEnvWith(t *testing.T, endpoints llm.Endpoints) *Env {
	p := trialtest.Open(t, testRT, runID, endpoints)
	return &Env{Runtime: p.Runtime, Relay: p.Relay, Gateway: p.Gateway, Binary: p.Binary, JobID: p.JobID, Version: "test", Limits: DefaultLimits}
}
