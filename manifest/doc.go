// Package manifest reads experiment manifests: the roster of an agent team
// (one orchestrator, any number of workers), their model endpoints, pinned
// persona prompts, prices and budgets.
//
// A manifest's identity is its condition hash: the SHA-256 of a canonical
// JSON form, computed exactly as the original Python system computed it, so
// results recorded by either system pool under the same hash. Parse is pure
// (bytes in, a value or every located problem out); Verify reads the pinned
// files once and returns their bytes with the roster expanded into agents.
//
// Schema version "1" manifests of the original load unchanged. troupe's own
// additions (agent_user, environment.override_pids) are left out of the
// canonical form when unset, so they never change an existing hash.
package manifest
