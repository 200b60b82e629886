package docker

import (
	"archive/tar"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task/taskfs"
)

// ImageTagPrefix names built task environments: troupe-env:<key>, where the
// key digests the environment folder and the image IDs of the base images
// its Dockerfile names, so an environment is built once per set of inputs.
const ImageTagPrefix = "troupe-env:"

// Labels on a built task environment.
const (
	// LabelEnvironment is the digest of the environment folder.
	LabelEnvironment = "troupe.environment"
	// LabelCacheKey is the digest of all the build's inputs: the folder and
	// the image IDs of its bases. The image's tag is made from it.
	LabelCacheKey = "troupe.cache-key"
	// LabelUncached, when present, says why the image is not reused: it
	// is built each time the environment is resolved.
	LabelUncached = "troupe.uncached"
)

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
// spec's folder. A build is tagged with a key of its inputs (the folder and
// the IDs of its base images) and reused while they stay the same; one
// build per folder runs at a time. With Rebuild, the first resolution of
// each key in this process builds again.
func (d *Docker) Image(ctx context.Context, spec runtime.ImageSpec) (runtime.Image, error) {
	ref, info, err := d.resolve(ctx, spec)
	if err != nil {
		return runtime.Image{}, err
	}
	if info.ID == "" {
		if info, err = d.cli.ImageInspect(ctx, ref); err != nil {
			return runtime.Image{}, fmt.Errorf("docker: inspect image %s: %w", ref, err)
		}
	}
	return describe(ref, info), nil
}

// resolve returns the image's reference and, when it has it already, its
// inspection.
func (d *Docker) resolve(ctx context.Context, spec runtime.ImageSpec) (string, image.InspectResponse, error) {
	var pullErr error
	if spec.Image != "" {
		if info, err := d.cli.ImageInspect(ctx, spec.Image); err == nil {
			return spec.Image, info, nil
		}
		if pullErr = d.pull(ctx, spec.Image); pullErr == nil {
			return spec.Image, image.InspectResponse{}, nil
		}
		if spec.Build == nil {
			return "", image.InspectResponse{}, fmt.Errorf("docker: image %s: %w: it is not on this engine and cannot be pulled (%v); with no registry reachable, load it (docker load -i image.tar) or build it, or give the task an environment/Dockerfile", spec.Image, ErrImageUnavailable, pullErr)
		}
	}
	if spec.Build == nil {
		return "", image.InspectResponse{}, fmt.Errorf("docker: %w: the task names no image and no environment to build", ErrImageUnavailable)
	}
	ref, info, _, err := d.build(ctx, spec.Build.Context, spec.Build.Dockerfile)
	return ref, info, err
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

// build builds an environment folder with the Dockerfile of that name in
// it ("" is Dockerfile), or finds it built from the same inputs, and
// returns its tag and inspection, and whether it built it now.
func (d *Docker) build(ctx context.Context, dir, name string) (string, image.InspectResponse, bool, error) {
	var none image.InspectResponse
	name = cmp.Or(name, "Dockerfile")
	if !filepath.IsLocal(name) {
		return "", none, false, fmt.Errorf("docker: %w: the Dockerfile %s is not a file inside %s", ErrImageUnavailable, name, dir)
	}
	dockerfile, err := readDockerfile(dir, name)
	if err != nil {
		return "", none, false, fmt.Errorf("docker: %w: %w", ErrImageUnavailable, err)
	}
	digest, err := taskfs.Digest(dir)
	if err != nil {
		return "", none, false, fmt.Errorf("docker: %w", err)
	}
	if name != "Dockerfile" {
		// One folder, two Dockerfiles: two images.
		digest += ":" + filepath.ToSlash(name)
	}
	d.buildMu.Lock()
	mu, ok := d.builds[digest]
	if !ok {
		mu = &sync.Mutex{}
		d.builds[digest] = mu
	}
	d.buildMu.Unlock()
	mu.Lock()
	defer mu.Unlock()

	key, bases, uncached := d.cacheKey(ctx, digest, dockerfile)
	tag := ImageTagPrefix + key[:24]
	labels := map[string]string{runtime.LabelVersion: d.version, LabelEnvironment: digest, LabelCacheKey: key}
	if uncached != nil {
		// Reusing an image here would be a guess: build, and let the
		// engine's layer cache make an unchanged build cheap.
		labels[LabelUncached] = uncached.Error()
		d.logger.Warn("docker: the environment's base images are not all known; it is built each time", "dir", dir, "reason", uncached)
	}
	d.buildMu.Lock()
	fresh := d.Rebuild && !d.rebuilt[key]
	d.buildMu.Unlock()
	old, _ := d.cli.ImageInspect(ctx, tag)
	if uncached == nil && !fresh && old.ID != "" {
		return tag, old, false, nil
	}
	d.logger.Info("docker: building environment", "dir", dir, "tag", tag, "bases", bases, "rebuild", fresh)
	if d.onBuild != nil {
		d.onBuild(tag, fresh)
	}
	err = d.runBuild(ctx, dir, func(w io.Writer) error { return tarDir(w, dir) }, build.ImageBuildOptions{
		Tags: []string{tag}, Labels: labels, Dockerfile: filepath.ToSlash(name),
		// A rebuild runs every step again; the base is the local image the
		// key was made from, not a newer one from a registry.
		NoCache: fresh, PullParent: false,
	})
	if err != nil {
		return "", none, false, err
	}
	built, err := d.cli.ImageInspect(ctx, tag)
	if err != nil {
		return "", none, false, fmt.Errorf("docker: inspect the image built from %s: %w", dir, err)
	}
	d.made(ctx, key, tag, old.ID, built.ID, fresh)
	return tag, built, true, nil
}

// runBuild builds an image with the classic builder from the context that
// write makes, and follows the build to its end; a failed build is a
// *BuildError that names what (dir) was built. Intermediate containers are
// removed, failed ones too.
func (d *Docker) runBuild(ctx context.Context, dir string, write func(io.Writer) error, opts build.ImageBuildOptions) error {
	opts.Remove, opts.ForceRemove, opts.Version = true, true, build.BuilderV1
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { pw.CloseWithError(write(pw)) })
	resp, err := d.cli.ImageBuild(ctx, pr, opts)
	if err != nil {
		pr.CloseWithError(err)
		wg.Wait()
		return &BuildError{Dir: dir, Err: err}
	}
	berr := readBuild(dir, resp.Body)
	resp.Body.Close()
	pr.CloseWithError(errors.New("build ended"))
	wg.Wait()
	return berr
}

// made records a key built (or committed) anew under Rebuild, so later
// resolutions of the job reuse it, and removes the image the tag held
// before when nothing else holds it.
func (d *Docker) made(ctx context.Context, key, tag, oldID, newID string, fresh bool) {
	if fresh {
		d.buildMu.Lock()
		if d.rebuilt == nil {
			d.rebuilt = map[string]bool{}
		}
		d.rebuilt[key] = true
		d.buildMu.Unlock()
	}
	if oldID != "" && oldID != newID {
		d.removeReplaced(ctx, tag, oldID)
	}
}

// removeReplaced removes the image a build took the tag from, when nothing
// else holds it: no other tag, no container. One still in use stays.
func (d *Docker) removeReplaced(ctx context.Context, tag, oldID string) {
	_, err := d.cli.ImageRemove(ctx, oldID, image.RemoveOptions{PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		d.logger.Warn("docker: remove the image a rebuild replaced", "image", short(strings.TrimPrefix(oldID, "sha256:")), "tag", tag, "err", err)
	}
}

// cacheKey digests what a build of an environment depends on: the folder
// (its digest) and the image ID of every base image its Dockerfile names.
// A base that is not local is pulled first. uncached, when not nil, says
// why the key cannot stand for the build's inputs (a FROM that cannot be
// read statically, a base that is nowhere to be found): the environment
// is then built every time.
func (d *Docker) cacheKey(ctx context.Context, digest string, dockerfile []byte) (key string, bases []string, uncached error) {
	h := sha256.New()
	fmt.Fprintf(h, "troupe-env/2\x00%s\x00", digest)
	refs, err := baseImages(dockerfile)
	if err != nil {
		fmt.Fprint(h, "uncached\x00")
		return hex.EncodeToString(h.Sum(nil)), nil, err
	}
	var errs []error
	for _, ref := range refs {
		id, err := d.baseID(ctx, ref.Ref)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: base image %s: %w", ref.Line, ref.Ref, err))
			continue
		}
		bases = append(bases, ref.Ref+"="+short(strings.TrimPrefix(id, "sha256:")))
		fmt.Fprintf(h, "%s\x00%s\x00", ref.Ref, id)
	}
	if len(errs) > 0 {
		fmt.Fprint(h, "uncached\x00")
		return hex.EncodeToString(h.Sum(nil)), bases, errors.Join(errs...)
	}
	return hex.EncodeToString(h.Sum(nil)), bases, nil
}

// baseID is a base image's ID, pulling the image when it is not local.
func (d *Docker) baseID(ctx context.Context, ref string) (string, error) {
	info, err := d.cli.ImageInspect(ctx, ref)
	if err == nil {
		return info.ID, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return "", err
	}
	if perr := d.pull(ctx, ref); perr != nil {
		return "", fmt.Errorf("%w: not on this engine, and the pull failed: %w", ErrImageUnavailable, perr)
	}
	if info, err = d.cli.ImageInspect(ctx, ref); err != nil {
		return "", err
	}
	return info.ID, nil
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

// maxDockerfile bounds the Dockerfile troupe reads for its cache key.
const maxDockerfile = 1 << 20

// readDockerfile reads the Dockerfile name of the build context dir,
// beneath it: not through a link that leaves it.
func readDockerfile(dir, name string) ([]byte, error) {
	d, err := taskfs.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("the build context %s: %w", dir, err)
	}
	defer d.Close()
	data, err := d.ReadFile(filepath.ToSlash(name), maxDockerfile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s has no %s", dir, name)
	}
	return data, err
}

// tarDir writes a build context: every file read beneath dir, and links
// as links. A link that leads out of the context is refused, naming it:
// the engine would resolve it inside the context anyway, so it could only
// mean something other than what it says.
func tarDir(w io.Writer, dir string) error {
	d, err := taskfs.Open(dir)
	if err != nil {
		return fmt.Errorf("the build context %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.CheckLinks("."); err != nil {
		return fmt.Errorf("the build context %s: %w", dir, err)
	}
	tw := tar.NewWriter(w)
	err = d.WalkDir(".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = d.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = p
		if !info.Mode().IsRegular() {
			return tw.WriteHeader(h)
		}
		f, err := d.OpenFile(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		// The header's size is the one written: a file that grew
		// since is cut there.
		_, err = io.CopyN(tw, f, h.Size)
		return err
	})
	if err != nil {
		return fmt.Errorf("the build context %s: %w", dir, err)
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
