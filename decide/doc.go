// Package decide holds the statistics that say how many trials a
// comparison of rosters needs, and when a running one may stop.
//
// It has three parts, all pure computation (no files, no clock):
//
//   - Plan sizes a fixed design: from a pilot's paired results (or stated
//     pass rates) it finds how many tasks × attempts a condition needs to
//     detect a difference of Δ against the baseline with power 1-β at
//     level α, for troupe's paired design, where each (task, attempt)
//     runs under both conditions. Variances come from EstimateVariance
//     (a pilot) or VarianceFromRates (stated rates).
//   - Test is the sequential test of one condition against the baseline:
//     a job runs in rounds (every task once more under every condition
//     still undecided), and after each round Add folds in the round's
//     paired results. Test keeps a confidence sequence for the mean
//     paired difference, valid at every round however many are looked
//     at (Waudby-Smith and Ramdas 2023, "Estimating means of bounded
//     random variables by betting"), and decides better, worse, or
//     within ±Δ as soon as the sequence allows (and, with a futility
//     level, "not better by Δ"). Its bets are sized for a difference of
//     Δ, which makes it, nearly, Wald's sequential probability ratio
//     test: quickest at Δ and above. A Test serialises to JSON
//     and is restored by replaying its rounds, so a resumed job continues
//     the same sequence; a round already added is refused.
//   - Simulate runs both on made-up jobs whose truth is known: the tests
//     use it to check the error rates, the power and the trials saved.
//
// Pairs is the vocabulary all three share: the paired results of one task
// (for a plan) or of one round (for a test), counted by their difference.
package decide
