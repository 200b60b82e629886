//go:build race

package decide

// simJobs is how many jobs a simulation test runs: fewer under the race
// detector, which makes each about ten times slower.
const simJobs = 400
