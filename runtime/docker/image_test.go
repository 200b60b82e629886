package docker

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
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

var baseImageCases = []struct {
	name       string
	dockerfile string
	want       []string
	notStatic  bool // an error, errNotStatic
}{
	{"empty", "", nil, false},
	{"one", "FROM debian:bookworm\nRUN true\n", []string{"debian:bookworm"}, false},
	{"digest", "FROM debian@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", []string{"debian@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, false},
	{"platform", "FROM --platform=linux/amd64 debian:12 AS build\nFROM --platform=$BUILDPLATFORM alpine:3", []string{"debian:12", "alpine:3"}, false},
	{"lower-case keywords", "from debian:12 as build\nrun true\nfrom build\nFrom alpine:3 As Final\n", []string{"debian:12", "alpine:3"}, false},
	{"stages", "FROM golang:1.26 AS Build\nRUN go build\nFROM alpine:3\nCOPY --from=build /x /x\nFROM BUILD AS again\nFROM again\n", []string{"golang:1.26", "alpine:3"}, false},
	{"a stage named later is an image", "FROM later\nFROM debian AS later\nFROM later\n", []string{"later", "debian"}, false},
	{"once each", "FROM debian AS a\nFROM debian AS b\nFROM debian\n", []string{"debian"}, false},
	{"scratch", "FROM scratch\nCOPY x /x\nFROM Scratch AS s\n", nil, false},
	{"arg default", "ARG BASE=debian:12\nFROM ${BASE}\nFROM $BASE AS again\n", []string{"debian:12"}, false},
	{"arg built from args", "ARG REG=docker.io/library\nARG TAG=12\nARG IMG=${REG}/debian\nFROM $IMG:$TAG\n", []string{"docker.io/library/debian:12"}, false},
	{"arg quoted, several on a line", "ARG A=\"debian\" B='12'\nFROM $A:${B}\n", []string{"debian:12"}, false},
	{"arg redefined", "ARG BASE=alpine\nARG BASE=debian\nFROM $BASE\n", []string{"debian"}, false},
	{"default word", "ARG X=\nARG Y=alpine\nFROM ${X:-debian}:12\nFROM ${Y:-debian}\nFROM ${X-busybox}x\n", []string{"debian:12", "alpine", "x"}, false},
	{"alternative word", "ARG X=\nARG Y=1\nFROM debian${X:+:nope}\nFROM alpine${Y:+:3}\nFROM busybox${X+:set}\n", []string{"debian", "alpine:3", "busybox:set"}, false},
	{"nested expansion", "ARG X=\nARG Y=debian\nFROM ${X:-${Y}}:12\n", []string{"debian:12"}, false},
	{"continuation lines", "FROM \\\n  --platform=linux/amd64 \\\n  debian:12 \\\n  AS build\nRUN a \\\n  && b\n", []string{"debian:12"}, false},
	{"continuation broken by comments and blank lines", "FROM \\\n# a comment inside\n\n  debian:12 \\  \n  AS build\n", []string{"debian:12"}, false},
	{"comments", "# FROM not-me\n   # FROM nor-me\nFROM debian:12\n# FROM nor-me-either \\\nRUN true\n", []string{"debian:12"}, false},
	{"escape directive", "# escape=`\nFROM `\n  debian:12\nRUN dir c:\\\n", []string{"debian:12"}, false},
	{"a directive after a comment is a comment", "# hello\n# escape=`\nFROM \\\n debian:12\n", []string{"debian:12"}, false},
	{"crlf and bom", "\ufeffFROM debian:12\r\nFROM alpine:3 \\\r\n  AS x\r\n", []string{"debian:12", "alpine:3"}, false},
	{"arg without default", "ARG BASE\nFROM ${BASE}\n", nil, true},
	{"arg without default, in a default", "ARG V\nARG BASE=debian:$V\nFROM $BASE\n", nil, true},
	{"undeclared", "FROM debian:$VERSION\n", nil, true},
	{"a stage's arg is not global", "FROM debian\nARG X=alpine\nFROM $X\n", []string{"debian"}, true},
	{"unresolvable with others", "ARG V\nFROM debian:12\nFROM img:$V\nFROM alpine:3\n", []string{"debian:12", "alpine:3"}, true},
	{"unfollowed expansion", "ARG X=debian:12\nFROM ${X%%:*}\n", nil, true},
	{"unclosed", "ARG X=debian\nFROM ${X\n", nil, true},
	{"no image", "FROM\nFROM --platform=linux/amd64\n", nil, true},
}

func TestBaseImages(t *testing.T) {
	for _, tc := range baseImageCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := baseImages([]byte(tc.dockerfile))
			var refs []string
			for _, b := range got {
				refs = append(refs, b.Ref)
			}
			if !slices.Equal(refs, tc.want) {
				t.Errorf("bases %q, want %q", refs, tc.want)
			}
			if tc.notStatic != (err != nil) || err != nil && !errors.Is(err, errNotStatic) {
				t.Errorf("error %v, want one: %v", err, tc.notStatic)
			}
			if err != nil && !strings.Contains(err.Error(), "line ") {
				t.Errorf("the error %q does not say where", err)
			}
		})
	}
	got, _ := baseImages([]byte("# syntax=docker/dockerfile:1\n\nARG A=x\n\nFROM \\\n\n  debian\nFROM alpine\n"))
	if len(got) != 2 || got[0].Line != 5 || got[1].Line != 8 {
		t.Errorf("the FROMs' lines: %+v, want 5 and 8", got)
	}
}

func FuzzBaseImages(f *testing.F) {
	for _, tc := range baseImageCases {
		f.Add([]byte(tc.dockerfile))
	}
	f.Fuzz(func(t *testing.T, dockerfile []byte) {
		got, err := baseImages(dockerfile)
		if err != nil && !errors.Is(err, errNotStatic) {
			t.Errorf("an error that is not errNotStatic: %v", err)
		}
		lines := strings.Count(string(dockerfile), "\n") + 1
		seen := map[string]bool{}
		for _, b := range got {
			if b.Ref == "" || strings.EqualFold(b.Ref, "scratch") || seen[b.Ref] || b.Line < 1 || b.Line > lines {
				t.Errorf("base %+v of %d lines (seen before: %v)", b, lines, seen[b.Ref])
			}
			seen[b.Ref] = true
		}
		again, err2 := baseImages(dockerfile)
		if !slices.Equal(got, again) || (err == nil) != (err2 == nil) {
			t.Errorf("two readings differ: %v %v, %v %v", got, err, again, err2)
		}
	})
}

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
	id := runtimetest.Started(t, d, cfg(), runtime.ContainerSpec{Image: img2.Ref})
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
