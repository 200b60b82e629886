package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/troupebench/troupe/runtime"
)

// CommitTagPrefix names the images made by committing a container (a
// stack's install, package trial): troupe-stack:<key>, where the key
// digests the base image's ID and the commit's key.
const CommitTagPrefix = "troupe-stack:"

// Labels on a committed image, beside troupe's own and LabelCacheKey.
const (
	// LabelBaseImage is the ID of the image the container was created
	// from.
	LabelBaseImage = "troupe.base-image"
	// LabelCommitKey is the commit's own key (runtime.CommitSpec.Key).
	LabelCommitKey = "troupe.commit-key"
)

// containerOnly are labels that describe a container's own resources: a
// committed image would pass them on to every container created from it
// (the engine merges the container's labels into the image's, and cannot
// drop one), so they are blanked.
var containerOnly = []string{labelNetwork, labelJobNetwork, labelServices, labelServiceNetwork}

// CommitOnce returns the image committed for spec: one per base image ID
// and key, tagged troupe-stack:<key>. When there is none (or, with
// Rebuild, this process has not made it yet), it calls run, which makes a
// container of this engine from spec.Base and returns it, and commits that
// container (paused, if it runs): its configuration stays the base
// image's. run's container is the caller's to remove. One call per image runs at a time,
// as builds do; the image it replaces under the tag is removed when
// nothing else holds it. made says whether run was called and its
// container committed.
func (d *Docker) CommitOnce(ctx context.Context, spec runtime.CommitSpec, run func(context.Context) (runtime.Container, error)) (img runtime.Image, made bool, err error) {
	base, err := d.cli.ImageInspect(ctx, spec.Base)
	if err != nil {
		return runtime.Image{}, false, fmt.Errorf("docker: inspect image %s: %w", spec.Base, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "troupe-stack/1\x00%s\x00%s\x00", base.ID, spec.Key)
	key := hex.EncodeToString(h.Sum(nil))
	tag := CommitTagPrefix + key[:24]

	d.buildMu.Lock()
	mu, ok := d.builds["commit:"+key]
	if !ok {
		mu = &sync.Mutex{}
		d.builds["commit:"+key] = mu
	}
	d.buildMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	d.buildMu.Lock()
	fresh := d.Rebuild && !d.rebuilt[key]
	d.buildMu.Unlock()
	old, _ := d.cli.ImageInspect(ctx, tag)
	if !fresh && old.ID != "" {
		return describe(tag, old), false, nil
	}

	ctr, err := run(ctx)
	if err != nil {
		return runtime.Image{}, false, err
	}
	id := ctr.ID()
	labels := d.labels(spec.Labels)
	labels[LabelBaseImage], labels[LabelCommitKey], labels[LabelCacheKey] = base.ID, spec.Key, key
	for _, l := range containerOnly {
		labels[l] = ""
	}
	// The base image's configuration, not the container's: its entry point
	// (troupe init), user and working folder are the caller's doing. What
	// the base leaves unset the engine fills from the container's; its
	// environment and labels are the base image's and troupe's.
	cfg := &container.Config{Labels: labels}
	if c := base.Config; c != nil {
		cfg.User, cfg.WorkingDir, cfg.Entrypoint, cfg.Cmd = c.User, c.WorkingDir, c.Entrypoint, c.Cmd
	}
	if cfg.Entrypoint == nil {
		// Empty, not null: the engine fills a null one from the container.
		cfg.Entrypoint = []string{}
	}
	resp, err := d.cli.ContainerCommit(ctx, id, container.CommitOptions{
		Reference: tag, Config: cfg, Pause: true, Author: "troupe " + d.version,
		Comment: fmt.Sprintf("%s on %s", spec.Key, short(strings.TrimPrefix(base.ID, "sha256:"))),
	})
	if err != nil {
		return runtime.Image{}, false, fmt.Errorf("docker: commit container %s as %s: %w", short(id), tag, err)
	}
	info, err := d.cli.ImageInspect(ctx, resp.ID)
	if err != nil {
		return runtime.Image{}, false, fmt.Errorf("docker: inspect the image committed as %s: %w", tag, err)
	}
	d.made(ctx, key, tag, old.ID, info.ID, fresh)
	return describe(tag, info), true, nil
}

// describe is what a trial knows of an image.
func describe(ref string, info image.InspectResponse) runtime.Image {
	img := runtime.Image{Ref: ref}
	if info.Config != nil {
		img.WorkDir, img.User = info.Config.WorkingDir, info.Config.User
		img.Entrypoint, img.Cmd = info.Config.Entrypoint, info.Config.Cmd
	}
	return img
}
