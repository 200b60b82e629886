package docker

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/runtimetest"
	"github.com/troupebench/troupe/task/taskfs"
)

// builds counts the builds a Docker value starts.
type builds struct {
	mu      sync.Mutex
	n       int
	noCache int
}

func countBuilds(d *Docker) *builds {
	b := &builds{}
	d.onBuild = func(tag string, noCache bool) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.n++
		if noCache {
			b.noCache++
		}
	}
	return b
}

func (b *builds) count() (n, noCache int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n, b.noCache
}

// testBaseName names a base image of this test alone, and fails the test
// if any image of that name is left when it ends.
func testBaseName(t *testing.T, d *Docker) string {
	t.Helper()
	name := "troupe-test-base-" + randomSuffix()
	t.Cleanup(func() {
		left, err := d.cli.ImageList(context.Background(), image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("reference", name+":*"))})
		if err != nil || len(left) > 0 {
			t.Errorf("images of %s left behind: %v %v", name, left, err)
		}
	})
	return name
}

// testBase builds a base image, tagged tag, whose /which holds which.
func testBase(t *testing.T, d *Docker, tag, which string) string {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+testImage+"\nCOPY which /which\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "which"), []byte(which+"\n"), 0o644)
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { pw.CloseWithError(tarDir(pw, dir)) })
	resp, err := d.cli.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags: []string{tag}, Labels: map[string]string{runtime.LabelVersion: runID},
		Remove: true, ForceRemove: true, Version: build.BuilderV1,
	})
	if err == nil {
		err = readBuild(dir, resp.Body)
		resp.Body.Close()
	}
	pr.CloseWithError(errors.New("build ended"))
	wg.Wait()
	if err != nil {
		t.Fatalf("build base %s: %v", tag, err)
	}
	return imageID(t, d, tag)
}

// imageID is an image's ID; the image is removed when the test ends.
func imageID(t *testing.T, d *Docker, ref string) string {
	t.Helper()
	info, err := d.cli.ImageInspect(t.Context(), ref)
	if err != nil {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	t.Cleanup(func() {
		if err := d.RemoveImage(context.Background(), info.ID); err != nil {
			t.Errorf("remove %s (%s): %v", ref, info.ID, err)
		}
	})
	return info.ID
}

// taskEnv is an environment folder built on base that copies the base's
// /which to /seen.
func taskEnv(t *testing.T, base string) string {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("# a task\nFROM "+base+" AS env\nRUN cp /which /seen\n"), 0o644)
	return dir
}

// A moved base tag gives a new build; an unchanged one reuses the image.
func TestImageBaseMoves(t *testing.T) {
	d := newDocker(t)
	ctx := t.Context()
	builds := countBuilds(d)
	name := testBaseName(t, d)
	moving := name + ":moving"
	testBase(t, d, moving, "A")
	dir := taskEnv(t, moving)
	img1, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}})
	if err != nil {
		t.Fatal(err)
	}
	imageID(t, d, img1.Ref)
	again, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}})
	if n, _ := builds.count(); err != nil || again.Ref != img1.Ref || n != 1 {
		t.Fatalf("unchanged inputs: %s %v after %d builds, want %s after 1", again.Ref, err, n, img1.Ref)
	}
	info, _ := d.cli.ImageInspect(ctx, img1.Ref)
	digest, _ := taskfs.Digest(dir)
	if l := info.Config.Labels; l[LabelEnvironment] != digest || !strings.HasPrefix(l[LabelCacheKey], strings.TrimPrefix(img1.Ref, ImageTagPrefix)) || l[LabelUncached] != "" {
		t.Errorf("labels %v", l)
	}

	testBase(t, d, name+":b", "B")
	if err := d.cli.ImageTag(ctx, name+":b", moving); err != nil {
		t.Fatal(err)
	}
	img2, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}})
	if err != nil {
		t.Fatal(err)
	}
	imageID(t, d, img2.Ref)
	if n, _ := builds.count(); img2.Ref == img1.Ref || !strings.HasPrefix(img2.Ref, ImageTagPrefix) || n != 2 {
		t.Fatalf("after the base moved: %s (was %s) after %d builds", img2.Ref, img1.Ref, n)
	}
	id := runtimetest.Started(t, d, cfg(), runtime.ContainerSpec{Image: img2.Ref}).ID()
	if out, _ := shell(t, d, id, "cat /seen"); strings.TrimSpace(out) != "B" {
		t.Errorf("the new build sees %q, want B", out)
	}
	// The build for the old base stays: moving the tag back reuses it.
	if !d.exists(ctx, img1.Ref) {
		t.Errorf("%s was removed", img1.Ref)
	}
}

// Rebuild builds each environment again, once per process.
func TestImageRebuild(t *testing.T) {
	ctx := t.Context()
	d := newDocker(t)
	name := testBaseName(t, d)
	testBase(t, d, name+":1", "A")
	dir := taskEnv(t, name+":1")
	img, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}})
	if err != nil {
		t.Fatal(err)
	}
	before := imageID(t, d, img.Ref)

	re := newDocker(t)
	re.Rebuild = true
	builds := countBuilds(re)
	var refs [2]string
	var errs [2]error
	var wg sync.WaitGroup
	for i := range refs {
		wg.Go(func() {
			var img runtime.Image
			img, errs[i] = re.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}})
			refs[i] = img.Ref
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	after := imageID(t, re, refs[0])
	if n, noCache := builds.count(); refs[0] != img.Ref || refs[1] != img.Ref || after == before || n != 1 || noCache != 1 {
		t.Errorf("two resolutions with Rebuild: %v, image %s (was %s), %d builds (%d without the cache), want the same tag, a new image, 1 build without the cache", refs, after, before, n, noCache)
	}
	if _, err := d.cli.ImageInspect(ctx, before); !cerrdefs.IsNotFound(err) {
		t.Errorf("the replaced image %s is still there: %v", before, err)
	}
	if again, err := re.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}}); err != nil || again.Ref != img.Ref {
		t.Errorf("a third resolution: %s %v", again.Ref, err)
	}
	if n, _ := builds.count(); n != 1 {
		t.Errorf("%d builds for three resolutions with Rebuild, want 1", n)
	}
}

// An environment whose base cannot be known before the build is built each
// time; the engine's layer cache keeps the image the same.
func TestImageUncached(t *testing.T) {
	ctx := t.Context()
	d := newDocker(t)
	builds := countBuilds(d)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("ARG BASE\nFROM ${BASE:-"+testImage+"}\nRUN echo "+runID+" > /built\n"), 0o644)
	var ids []string
	for range 2 {
		img, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, imageID(t, d, img.Ref))
		info, _ := d.cli.ImageInspect(ctx, img.Ref)
		if !strings.Contains(info.Config.Labels[LabelUncached], "ARG BASE has no default") {
			t.Errorf("labels %v", info.Config.Labels)
		}
	}
	if n, _ := builds.count(); n != 2 || ids[0] != ids[1] {
		t.Errorf("%d builds, images %v: want 2 builds of one image", n, ids)
	}

	// A base that is nowhere to be found: the build says so.
	missing := t.TempDir()
	os.WriteFile(filepath.Join(missing, "Dockerfile"), []byte("FROM troupe-test/does-not-exist:"+runID+"\n"), 0o644)
	_, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: missing}})
	if _, ok := errors.AsType[*BuildError](err); !ok {
		t.Errorf("a missing base: %v", err)
	}
}

// BenchmarkImageCached resolves an environment built already: the folder's
// digest, the base images' IDs and the tag's inspection.
func BenchmarkImageCached(b *testing.B) {
	d := newDocker(b)
	ctx := context.Background()
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+testImage+"\nRUN echo "+runID+" > /built\n"), 0o644)
	img, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.RemoveImage(context.Background(), img.Ref) })
	for b.Loop() {
		if _, err := d.Image(ctx, runtime.ImageSpec{Build: &runtime.BuildSpec{Context: dir}}); err != nil {
			b.Fatal(err)
		}
	}
}
