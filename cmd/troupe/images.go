package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/job"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/docker"
	"github.com/troupebench/troupe/runtime/kubernetes"
	"github.com/troupebench/troupe/task"
)

func newImagesCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Build, with the local Docker Engine, the images a Kubernetes cluster runs trials from, and push them",
		Long: `A Kubernetes cluster cannot build images: it pulls them, or finds them in its nodes' image
caches. troupe run --runtime kubernetes therefore looks for two kinds of images that the
Docker runtime makes for itself on the fly, under names that depend only on their content:

  REPO/troupe-env:<digest>   a task's environment (environment/Dockerfile, or the builds of
                             its docker-compose.yaml), the digest that of the folder
  REPO/troupe-bin:<digest>   troupe's own static binary at /troupe, FROM scratch, the digest
                             that of the binary; it is copied into every trial's pod

These commands build them with the local Docker Engine (DOCKER_HOST's), name them that
way and, with --push, push them. REPO is --repo; it must be the --image-repo that troupe
run --runtime kubernetes is given. A task whose folder changes gets a new name, and so
does another troupe's binary: run images build again after editing a task, and images
binary after installing another troupe.

Without --repo the images are named ` + runtime.DefaultImageRepo + `/…, a name no registry answers to:
load them into every node of the cluster instead of pushing them, e.g.

  kind load docker-image REF...                                    (kind)
  docker save REF... | ctr -n k8s.io images import -               (on each containerd node)

--push sends an image with the credentials that docker login left in the Docker CLI's
config file ($DOCKER_CONFIG/config.json, else ~/.docker/config.json). troupe cannot use a
credential helper (credsStore, credHelpers): push such images with docker push REF.

--repo can also come from TROUPE_IMAGE_REPO or the config file's kubernetes: image_repo:,
the setting troupe run --image-repo reads too: set there, both agree.`,
		Example: `  troupe images build examples/tasks --repo registry.example.com/troupe --push
  troupe images binary --repo registry.example.com/troupe --push
  troupe run team.yaml --tasks examples/tasks --runtime kubernetes --image-repo registry.example.com/troupe

  troupe images build ~/datasets/terminal-bench-2 && troupe images binary   # for kind: no registry
  kind load docker-image $(docker image ls --format '{{.Repository}}:{{.Tag}}' '` + runtime.DefaultImageRepo + `/*')`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newImagesBuildCmd(a), newImagesBinaryCmd(a))
	return cmd
}

// imagesOptions are what both images commands take.
type imagesOptions struct {
	// repo is where the images are named; "" is runtime.DefaultImageRepo.
	repo string
	push bool
}

// imagesFlags adds --repo and --push.
func imagesFlags(cmd *cobra.Command, opts *imagesOptions) {
	cmd.Flags().String("repo", "", "the repository the images are named in, as troupe run --image-repo gives it (default "+runtime.DefaultImageRepo+": load them into the nodes)")
	cmd.Flags().BoolVar(&opts.push, "push", false, "push each image to the registry --repo names")
}

// repoPattern is a repository to put images in: a host (with a port), then
// lower-case path components, as Docker reads names.
var repoPattern = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$`)

// resolve reads --repo with troupe's precedence (the flag,
// TROUPE_IMAGE_REPO, the config file's kubernetes: image_repo, which
// troupe run --image-repo reads too) and checks it with --push.
func (opts *imagesOptions) resolve(a *app, cmd *cobra.Command) error {
	v, err := a.settings(cmd, "image_repo")
	if err != nil {
		return err
	}
	if err := v.BindPFlag("image_repo", cmd.Flags().Lookup("repo")); err != nil {
		return err
	}
	opts.repo = strings.TrimSuffix(v.GetString("image_repo"), "/")
	switch {
	case opts.repo != "" && !repoPattern.MatchString(opts.repo):
		return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--repo %q is not an image repository: a registry host (with its port), then a path in lower case, e.g. registry.example.com/troupe or 127.0.0.1:5000/troupe", opts.repo)}
	case opts.push && (opts.repo == "" || opts.repo == runtime.DefaultImageRepo):
		return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--push needs --repo: %s is no registry (load its images into the cluster's nodes instead: troupe images --help says how)", runtime.DefaultImageRepo)}
	}
	return nil
}

// withDocker resolves the options and runs f with the local engine, which
// builds the images.
func (opts *imagesOptions) withDocker(a *app, cmd *cobra.Command, f func(context.Context, *docker.Docker) error) error {
	if err := opts.resolve(a, cmd); err != nil {
		return err
	}
	ctx := cmd.Context()
	d := docker.New(shortVersion(), nil)
	if err := d.Open(ctx); err != nil {
		return fmt.Errorf("%w\n(troupe images builds with the local Docker Engine; troupe doctor checks it)", err)
	}
	defer d.Close(context.WithoutCancel(ctx))
	return f(ctx, d)
}

func newImagesBuildCmd(a *app) *cobra.Command {
	var opts imagesOptions
	cmd := &cobra.Command{
		Use:   "build TASK_PATH... [--repo REPO] [--push]",
		Short: "Build each task's environment and name it REPO/troupe-env:<digest>, as the Kubernetes runtime looks for it",
		Long: `Build the environment of each task (a task folder, or a folder of tasks: a dataset) with
the local Docker Engine, exactly as troupe run builds it (and reusing what it built: the
image troupe-env:<key> of the same inputs), then name it REPO/troupe-env:<digest of the
environment folder>, the name troupe run --runtime kubernetes --image-repo REPO looks for,
and, with --push, push it. The builds of a task's docker-compose.yaml (its main service,
its sidecars) are built and named the same way.

A task that names only a docker_image, without environment/Dockerfile, is skipped: the
cluster pulls that image itself. A task with both is built: the cluster tries its
docker_image first, then this image.

One line per image: the task, the name, built or reused, and pushed (or what to do with
it). Exit status: 0 when every task's images are ready, 1 when a task is refused or its
build or push fails (the others are still done), 2 for a usage error.`,
		Example: `  troupe images build examples/tasks
  troupe images build ~/datasets/terminal-bench-2 --repo registry.example.com/troupe --push`,
		Args: minArgs(1, "a task folder or a folder of tasks"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withDocker(a, cmd, func(ctx context.Context, d *docker.Docker) error {
				return runImagesBuild(ctx, a.stdout, a.stderr, d, args, opts)
			})
		},
	}
	imagesFlags(cmd, &opts)
	return cmd
}

// envImage is one line of troupe images build's plan: an environment to
// build and the name the cluster looks for it under, or why a task has
// none.
type envImage struct {
	// name is the task's, or task/service for a compose sidecar.
	name string
	// task is the task's folder.
	task  string
	build runtime.BuildSpec
	ref   string
	// skip, when set, says why nothing is built for the task.
	skip string
	// refused is why the task could not be read, err why its image
	// cannot be named.
	refused, err error
}

// planImages reads the tasks of paths, as troupe tasks load does, and
// lists the environments their trials build (job.TaskImages: the images a
// job's plan lists) with the names they have in repo. A task that cannot
// be read is a line with its error; one whose trial container is only
// pulled is a line that says so.
func planImages(paths []string, repo string) ([]envImage, error) {
	dirs, err := task.Dirs(paths)
	if err != nil && len(dirs) == 0 {
		return nil, err
	}
	var plan []envImage
	for _, dir := range dirs {
		t, lerr := task.Load(dir, task.Options{})
		if lerr != nil {
			plan = append(plan, envImage{name: filepath.Base(dir), task: dir, refused: lerr})
			continue
		}
		for _, img := range job.TaskImages(t) {
			switch {
			case img.Context != "":
				b := envImage{name: img.Name(), task: t.Dir, build: img.Build()}
				b.ref, b.err = kubernetes.EnvironmentRef(repo, b.build)
				plan = append(plan, b)
			case img.Service != "":
				// A sidecar that is only pulled: the cluster pulls it.
			case img.Pull != "":
				plan = append(plan, envImage{name: t.Name, task: t.Dir, skip: "it names only docker_image " + img.Pull + " (no environment/Dockerfile): the cluster pulls that image itself"})
			default:
				plan = append(plan, envImage{name: t.Name, task: t.Dir, err: errors.New(img.Error)})
			}
		}
	}
	return plan, err
}

func runImagesBuild(ctx context.Context, out, progress io.Writer, d *docker.Docker, paths []string, opts imagesOptions) error {
	plan, perr := planImages(paths, opts.repo)
	width := 0
	for _, img := range plan {
		width = max(width, len(img.name))
	}
	counts := map[string]int{}
	var loads []string
	for _, img := range plan {
		if err := ctx.Err(); err != nil {
			return err
		}
		state, err := "", img.err
		switch {
		case img.refused != nil:
			counts["refused"]++
			fmt.Fprintf(out, "%-*s  refused:\n", width, img.name)
			for _, line := range problemLines(img.refused) {
				fmt.Fprintf(out, "    %s\n", strings.TrimSpace(line))
			}
			continue
		case img.skip != "":
			counts["skipped"]++
			fmt.Fprintf(out, "%-*s  skipped: %s\n", width, img.name, img.skip)
			continue
		case err == nil:
			state, err = buildEnvironment(ctx, d, img, opts, progress)
		}
		if err != nil && ctx.Err() != nil {
			return ctx.Err() // interrupted: not a failure of this image
		}
		if err != nil {
			counts["failed"]++
			fmt.Fprintf(out, "%-*s  %s  failed: %s\n", width, img.name, cmp.Or(img.ref, "-"), indent(err.Error()))
			continue
		}
		counts[state]++
		if !opts.push {
			loads = append(loads, img.ref)
		}
		fmt.Fprintf(out, "%-*s  %s  %s, %s\n", width, img.name, img.ref, state, afterward(opts))
	}
	fmt.Fprintf(out, "%d built, %d reused, %d skipped (docker_image only), %d refused, %d failed\n", counts["built"], counts["reused"], counts["skipped"], counts["refused"], counts["failed"])
	loadHint(out, opts, loads)
	if perr != nil {
		return perr // a path that was neither a task nor a folder of tasks
	}
	if counts["failed"]+counts["refused"] > 0 {
		return &reportedError{code: exitFailed}
	}
	return nil
}

// buildEnvironment builds (or finds built) one environment, names it
// img.ref and, with --push, pushes it. state is built or reused; an error
// says which step failed and what to do.
func buildEnvironment(ctx context.Context, d *docker.Docker, img envImage, opts imagesOptions, progress io.Writer) (state string, err error) {
	tag, built, err := d.BuildEnvironment(ctx, img.build)
	if err != nil {
		return "", fmt.Errorf("%w\n(fix the task's environment: troupe tasks check %s builds it and runs the task's own solution in it)", err, img.task)
	}
	state = "reused"
	if built {
		state = "built"
	}
	if err := d.Tag(ctx, tag, img.ref); err != nil {
		return "", err
	}
	if opts.push {
		if err := d.Push(ctx, img.ref, progress); err != nil {
			return "", pushAdvice(err, img.ref, opts.repo)
		}
	}
	return state, nil
}

// pushAdvice adds to a failed push what to check.
func pushAdvice(err error, ref, repo string) error {
	if errors.Is(err, docker.ErrCredentialHelper) {
		return err
	}
	return fmt.Errorf("%w\n(the image is tagged on this engine; check that --repo %s names a registry this engine reaches, and that docker login was done for it; or push it with docker push %s)", err, repo, ref)
}

// afterward says what happened to a ready image after its build, or what
// is left to do with it.
func afterward(opts imagesOptions) string {
	switch {
	case opts.push:
		return "pushed"
	case opts.repo == "" || opts.repo == runtime.DefaultImageRepo:
		return "load it into the cluster's nodes"
	default:
		return "not pushed (--push pushes it)"
	}
}

// loadHint says, after the lines, how to load images that no registry
// serves into a cluster's nodes.
func loadHint(out io.Writer, opts imagesOptions, refs []string) {
	if len(refs) == 0 || afterward(opts) != "load it into the cluster's nodes" {
		return
	}
	list := strings.Join(refs, " ")
	fmt.Fprintf(out, "%s is no registry: load the images into every node of the cluster, e.g.\n  kind load docker-image %s\n  docker save %s | ctr -n k8s.io images import -   (on each containerd node)\n", runtime.DefaultImageRepo, list, list)
}

func newImagesBinaryCmd(a *app) *cobra.Command {
	var opts imagesOptions
	cmd := &cobra.Command{
		Use:   "binary [--repo REPO] [--push]",
		Short: "Put troupe's static binary in an image, REPO/troupe-bin:<digest>, as the Kubernetes runtime looks for it",
		Long: `Put the static troupe binary that trial containers run (this one, or a static copy built
from troupe's source when this one needs a dynamic loader, as troupe run does) in an image
FROM scratch, at ` + runtime.BinaryImagePath + `, named REPO/troupe-bin:<digest of the binary>: the image
troupe run --runtime kubernetes --image-repo REPO copies the binary into each trial's pod
from. An image of that name is reused (the name is the binary's digest); --push pushes it.

Run it again after installing another troupe: a new binary has a new name.`,
		Example: `  troupe images binary
  troupe images binary --repo registry.example.com/troupe --push`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withDocker(a, cmd, func(ctx context.Context, d *docker.Docker) error {
				return runImagesBinary(ctx, a.stdout, a.stderr, d, opts)
			})
		},
	}
	imagesFlags(cmd, &opts)
	return cmd
}

func runImagesBinary(ctx context.Context, out, progress io.Writer, d *docker.Docker, opts imagesOptions) error {
	bin, src, err := selfBinary(ctx)
	if err != nil {
		return err
	}
	ref := runtime.BinaryImageRef(opts.repo, bin)
	reused, err := d.BuildBinaryImage(ctx, bin, ref)
	if err != nil {
		return err
	}
	state := "built"
	if reused {
		state = "reused"
	}
	if opts.push {
		if err := d.Push(ctx, ref, progress); err != nil {
			return pushAdvice(err, ref, opts.repo)
		}
	}
	fmt.Fprintf(out, "troupe  %s  %s, %s\n", ref, state, afterward(opts))
	if src != "" {
		fmt.Fprintf(out, "(this troupe needs a dynamic loader: the image holds a static copy built from %s)\n", src)
	}
	if !opts.push {
		loadHint(out, opts, []string{ref})
	}
	return nil
}
