// Package report turns trial results into decisions: which roster is better,
// by how much, with what confidence, and at what cost. It is `troupe
// compare` (tables, markdown, JSON, a self-contained HTML report) and
// `troupe view` (a read-only local web UI over job folders).
//
// It reads result.json files as the file format defines them (docs/run.md),
// not troupe's in-memory types, so results of other versions and hand-made
// fixtures read alike. Its statistics (Wilson intervals, the unbiased
// pass@k, paired bootstrap intervals with a fixed seed, the exact McNemar
// test) are small functions, each tested against published values.
package report
