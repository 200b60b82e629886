package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/dataset"
	"github.com/troupebench/troupe/task"
)

func newDatasetsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "datasets",
		Short: "Harbor's named datasets: what a registry has (troupe run --dataset runs one)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newDatasetsListCmd(a))
	return cmd
}

// registryFlag adds --registry, which datasets list and run share.
func registryFlag(cmd *cobra.Command) {
	cmd.Flags().String("registry", "", "the dataset registry: a registry.json file or an http(s) URL (default $TROUPE_REGISTRY, else the config file's registry, else Harbor's)")
}

// registry resolves the registry to read with troupe's precedence:
// --registry, $TROUPE_REGISTRY, the config file's registry, Harbor's.
func (a *app) registry(cmd *cobra.Command) (string, error) {
	v, err := a.settings(cmd, "registry")
	if err != nil {
		return "", err
	}
	return cmp.Or(v.GetString("registry"), dataset.DefaultRegistry), nil
}

func loadRegistry(ctx context.Context, source string) (*dataset.Registry, error) {
	return dataset.Load(ctx, source, &http.Client{Timeout: time.Minute})
}

type datasetsListOptions struct {
	registry string
	json     bool
}

func newDatasetsListCmd(a *app) *cobra.Command {
	var opts datasetsListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a registry's datasets: name, version, number of tasks, description",
		Long: `List the datasets of a registry in Harbor's registry.json format: a JSON list of
datasets, each a name, a version, a description and tasks, each task a git repository
(git_url), a commit (git_commit_id) and a folder in it (path). By default the registry
is Harbor's own (` + dataset.DefaultRegistry + `);
--registry or $TROUPE_REGISTRY names another: a file or an http(s) URL.

troupe run --dataset NAME@VERSION runs a dataset: its tasks are fetched at their pinned
commits into ~/.cache/troupe/datasets (a repository is cloned once; a task fetched
before is checked against its recorded digest and reused), and run as --tasks would
run their folders. NAME alone is its version "head", else its newest. See docs/run.md.`,
		Example: `  troupe datasets list
  troupe datasets list --registry ./registry.json
  troupe datasets list --json | jq -r 'select(.name == "terminal-bench") | .version'
  troupe run team.yaml --dataset terminal-bench@2.0 --attempts 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opts.registry, err = a.registry(cmd); err != nil {
				return err
			}
			return runDatasetsList(cmd.Context(), a.output(opts.json), opts)
		},
	}
	registryFlag(cmd)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object per dataset")
	return cmd
}

// datasetSummary is one dataset as datasets list reports it.
type datasetSummary struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Tasks       int    `json:"tasks"`
	Description string `json:"description"`
}

func runDatasetsList(ctx context.Context, out io.Writer, opts datasetsListOptions) error {
	reg, err := loadRegistry(ctx, opts.registry)
	if err != nil {
		return err
	}
	list := slices.Clone(reg.Datasets)
	slices.SortStableFunc(list, func(a, b *dataset.Dataset) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), dataset.CompareVersions(a.Version, b.Version))
	})
	if opts.json {
		enc := json.NewEncoder(out)
		for _, d := range list {
			if err := enc.Encode(datasetSummary{Name: d.Name, Version: d.Version, Tasks: len(d.Tasks), Description: d.Description}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tTASKS\tDESCRIPTION")
	for _, d := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", d.Name, d.Version, len(d.Tasks), firstLine(d.Description, 72))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s in %s; troupe run MANIFEST --dataset NAME@VERSION runs one\n", count(len(list), "dataset"), reg.Source)
	return err
}

// firstLine is s's first line, cut to at most n characters.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(strings.TrimSpace(s)); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return strings.TrimSpace(s)
}

// datasetLimits are the --dataset-max-… flags: what fetching a dataset may
// write into the cache; 0 is dataset.DefaultLimits'.
type datasetLimits struct {
	fileMB, taskMB, cloneMB, entries int
}

// datasetLimitFlags adds the --dataset-max-… flags to a command that
// fetches datasets.
func datasetLimitFlags(cmd *cobra.Command, l *datasetLimits) {
	d := dataset.DefaultLimits
	f := cmd.Flags()
	f.IntVar(&l.fileMB, strings.TrimPrefix(dataset.FlagFileMB, "--"), 0, fmt.Sprintf("the largest file of a fetched task, in MiB (0: %d)", d.FileBytes>>20))
	f.IntVar(&l.taskMB, strings.TrimPrefix(dataset.FlagTaskMB, "--"), 0, fmt.Sprintf("the largest fetched task, its files together, in MiB (0: %d)", d.TaskBytes>>20))
	f.IntVar(&l.entries, strings.TrimPrefix(dataset.FlagEntries, "--"), 0, fmt.Sprintf("the most files, folders and links of a fetched task (0: %d)", d.Entries))
	f.IntVar(&l.cloneMB, strings.TrimPrefix(dataset.FlagCloneMB, "--"), 0, fmt.Sprintf("the most one clone or fetch of a dataset's repository may receive, in MiB (0: %d)", d.CloneBytes>>20))
}

// limits are the flags as dataset.Limits; a negative value is refused.
func (l datasetLimits) limits() (dataset.Limits, error) {
	for flag, v := range map[string]int{dataset.FlagFileMB: l.fileMB, dataset.FlagTaskMB: l.taskMB, dataset.FlagEntries: l.entries, dataset.FlagCloneMB: l.cloneMB} {
		if v < 0 {
			return dataset.Limits{}, fmt.Errorf("%s must be 0 (the default) or more, not %d", flag, v)
		}
	}
	return dataset.Limits{FileBytes: int64(l.fileMB) << 20, TaskBytes: int64(l.taskMB) << 20, Entries: l.entries, CloneBytes: int64(l.cloneMB) << 20}, nil
}

// datasetTasks fetches the datasets that --dataset names (NAME@VERSION, or
// NAME for its newest) from the registry, within the limits, and returns
// their task folders in the cache, for troupe run to read as it reads
// --tasks, and where each came from, by folder (the trial records it).
// Git's own progress goes to progress, nil for none.
func datasetTasks(ctx context.Context, stderr, progress io.Writer, refs []string, registry string, limits dataset.Limits) ([]string, map[string]*task.Origin, error) {
	if len(refs) == 0 {
		return nil, nil, nil
	}
	reg, err := loadRegistry(ctx, registry)
	if err != nil {
		return nil, nil, err
	}
	f := &dataset.Fetcher{Log: stderr, Progress: progress, Limits: limits}
	var dirs []string
	origins := map[string]*task.Origin{}
	var errs []error
	for _, ref := range refs {
		ds, err := reg.Lookup(ref)
		if err != nil {
			errs = append(errs, fmt.Errorf("--dataset %s: %w", ref, err))
			continue
		}
		fmt.Fprintf(stderr, "dataset %s: %s at pinned commits, from %s\n", ds.Ref(), count(len(ds.Tasks), "task"), reg.Source)
		got, err := f.Fetch(ctx, ds)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, d := range got { // one folder a task, in the dataset's order
			if slices.Contains(dirs, d) { // the same dataset given twice
				continue
			}
			dirs = append(dirs, d)
			t := ds.Tasks[i]
			origins[filepath.Clean(d)] = &task.Origin{Name: ds.Name, Version: ds.Version, Registry: reg.Source, GitURL: t.GitURL, GitCommit: t.GitCommit, Path: t.Path}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return dirs, origins, nil
}
