package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/troupebench/troupe/runtime"
)

// ImageTagPrefix names built task environments: troupe-env:<digest>, so an
// unchanged environment folder is built once.
const ImageTagPrefix = "troupe-env:"

// BuildError is a failed image build: the step that failed and the end of
// its output.
type BuildError struct {
	Dir, Step, Output string
	Err               error
}

func (e *BuildError) Error() string {
	msg := fmt.Sprintf("building %s failed", e.Dir)
	if e.Step != "" {
		msg += " at " + e.Step
	}
	msg += ": " + e.Err.Error()
	if e.Output != "" {
		msg += "\n" + e.Output
	}
	return msg
}

func (e *BuildError) Unwrap() error { return e.Err }

// ErrImageUnavailable means an image is not local, cannot be pulled and has
// nothing to build it from.
var ErrImageUnavailable = errors.New("image not available")

// Image resolves an image: a local one, else a pull, else a build of the
// spec's folder under a content-addressed tag, one build per digest at a time.
func (d *Docker) Image(ctx context.Context, spec runtime.ImageSpec) (runtime.Image, error) {
	ref, err := d.resolve(ctx, spec)
	if err != nil {
		return runtime.Image{}, err
	}
	info, err := d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return runtime.Image{}, fmt.Errorf("docker: inspect image %s: %w", ref, err)
	}
	img := runtime.Image{Ref: ref}
	if info.Config != nil {
		img.WorkDir, img.User = info.Config.WorkingDir, info.Config.User
	}
	return img, nil
}

func (d *Docker) resolve(ctx context.Context, spec runtime.ImageSpec) (string, error) {
	var pullErr error
	if spec.Image != "" {
		if d.exists(ctx, spec.Image) {
			return spec.Image, nil
		}
		if pullErr = d.pull(ctx, spec.Image); pullErr == nil {
			return spec.Image, nil
		}
		if spec.BuildDir == "" {
			return "", fmt.Errorf("docker: image %s: %w: it is not on this engine and cannot be pulled (%v); with no registry reachable, load it (docker load -i image.tar) or build it, or give the task an environment/Dockerfile", spec.Image, ErrImageUnavailable, pullErr)
		}
	}
	if spec.BuildDir == "" {
		return "", fmt.Errorf("docker: %w: the task names no image and no environment to build", ErrImageUnavailable)
	}
	return d.build(ctx, spec.BuildDir)
}

func (d *Docker) exists(ctx context.Context, ref string) bool {
	_, err := d.cli.ImageInspect(ctx, ref)
	return err == nil
}

func (d *Docker) pull(ctx context.Context, ref string) error {
	rc, err := d.cli.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return err
	}
	defer rc.Close()
	return jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, nil)
}

func (d *Docker) build(ctx context.Context, dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "Dockerfile")); err != nil {
		return "", fmt.Errorf("docker: %w: %s has no Dockerfile", ErrImageUnavailable, dir)
	}
	digest, err := runtime.DirDigest(dir)
	if err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	tag := ImageTagPrefix + digest[:24]
	d.buildMu.Lock()
	mu, ok := d.builds[digest]
	if !ok {
		mu = &sync.Mutex{}
		d.builds[digest] = mu
	}
	d.buildMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if d.exists(ctx, tag) {
		return tag, nil
	}
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { pw.CloseWithError(tarDir(pw, dir)) })
	resp, err := d.cli.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags: []string{tag}, Labels: map[string]string{runtime.LabelVersion: d.version, "troupe.environment": digest},
		Remove: true, ForceRemove: true, Version: build.BuilderV1,
	})
	if err != nil {
		pr.CloseWithError(err)
		wg.Wait()
		return "", &BuildError{Dir: dir, Err: err}
	}
	berr := readBuild(dir, resp.Body)
	resp.Body.Close()
	pr.CloseWithError(errors.New("build ended"))
	wg.Wait()
	if berr != nil {
		return "", berr
	}
	return tag, nil
}

// readBuild follows the build's message stream: a failing build reports its
// error only there, not as an API error.
func readBuild(dir string, body io.Reader) error {
	dec := json.NewDecoder(body)
	var step string
	var out []string
	for {
		var m jsonmessage.JSONMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return &BuildError{Dir: dir, Step: step, Output: strings.Join(out, "\n"), Err: fmt.Errorf("reading the build's output: %w", err)}
		}
		for line := range strings.Lines(m.Stream) {
			line = strings.TrimRight(line, "\n")
			if strings.HasPrefix(line, "Step ") {
				step = line
			}
			if line != "" {
				out = append(out, line)
				if len(out) > 30 {
					out = slices.Delete(out, 0, 1)
				}
			}
		}
		if m.Error != nil {
			return &BuildError{Dir: dir, Step: step, Output: strings.Join(out, "\n"), Err: errors.New(m.Error.Message)}
		}
	}
}

// tarDir writes a build context.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// RemoveImage removes an image troupe built; one already gone is fine.
func (d *Docker) RemoveImage(ctx context.Context, ref string) error {
	if _, err := d.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: remove image %s: %w", ref, err)
	}
	return nil
}
