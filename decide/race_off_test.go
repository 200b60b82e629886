//go:build !race

package decide

// simJobs is how many jobs a simulation test runs: the 2,000 that the
// Monte Carlo errors below are stated for.
const simJobs = 2000
