// Package report turns trial results into decisions: which roster is better,
// by how much, with what confidence, and at what cost. It is `troupe
// compare` (tables, markdown, JSON, a self-contained HTML report) and
// `troupe view` (a read-only local web UI over job folders).
//
// It reads result.json files with the format's one reader (package
// trialdir, which the trial writes them with), never the trial's
// machinery, and checks the figures a comparison sums; what an outcome
// counts as is trial/outcome's, the one definition the job's own counts
// use too. A result it cannot read is
// named in every report, never dropped silently; a figure of nothing (the
// pass rate of a condition with no scored trial) is null, never 0. Its
// statistics (Wilson intervals, the unbiased pass@k, percentile bootstrap
// intervals with a fixed seed, the exact McNemar test, and the
// task-clustered intervals: a bootstrap of tasks and the CR1 standard
// error) are small functions, each tested against published values or a
// second implementation. Which interval a row leads with, and why, is
// stated in every format (IntervalPolicy).
package report
