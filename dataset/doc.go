// Package dataset turns a dataset's name into task folders on disk: it reads
// a registry in Harbor's registry.json format (a list of datasets, each a
// name, a version, a description and tasks, each task a git repository, a
// pinned commit and a path in it), finds a dataset by name@version as Harbor
// does, and fetches its tasks at their pinned commits into a cache.
//
// The parts, in the order a run uses them:
//
//   - Load reads a registry from a file or an http(s) URL; Parse (pure) turns
//     its bytes into a Registry, or into every problem, each located at its
//     line and column (*located.Error).
//   - Registry.Lookup finds "name@version" ("name" alone: "head", else the
//     newest version, as Harbor resolves it). An unknown name lists the
//     close names; an unknown version, the versions there are
//     (*NotFoundError).
//   - Fetcher.Fetch (or Fetch) clones each repository once into the cache
//     (with go-git: no git binary is needed), reads every task's folder out of
//     its pinned commit, checking every object read against its git id, and
//     records a digest of the folder beside it. A task with a link leading
//     out of its folder (itself or through a chain of links) is refused, and
//     every task and clone is bounded (Limits), checked as it arrives. A later Fetch reuses a
//     folder whose digest still matches, without touching the network, and
//     fetches a changed one again.
//
// The cache (DefaultCacheDir, ~/.cache/troupe/datasets on Linux) holds:
//
//	lock                     taken while a Fetch writes; a second troupe waits
//	repos/<id>/              a bare clone of one repository URL
//	tasks/<id>/<task>/       one task folder, as the pinned commit has it
//	tasks/<id>/fetched.json  where it came from and its digest
//
// Everything in it can be deleted at any time: it is fetched again.
package dataset
