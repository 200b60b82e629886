package docker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/troupebench/troupe/runtime"
)

// started creates and starts a container of image the way a trial does:
// troupe init as PID 1, troupe's binary mounted. remove removes it.
func started(t *testing.T, d *Docker, image string) (id string, remove func()) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{runtime.LabelJob: runID, runtime.LabelTrial: "t-" + strings.ReplaceAll(t.Name(), "/", "-")}
	c, err := d.Create(ctx, runtime.ContainerSpec{Image: image, Entrypoint: []string{runtime.BinaryPath, "init"}, Binary: testBinary, Labels: labels, Pids: 512})
	if err != nil {
		t.Fatal(err)
	}
	id = c.ID()
	remove = func() {
		if err := d.Remove(context.Background(), runtime.Resource{Kind: runtime.KindContainer, ID: id}); err != nil {
			t.Errorf("remove: %v", err)
		}
	}
	t.Cleanup(remove)
	if err := d.Container(id).Start(ctx); err != nil {
		t.Fatal(err)
	}
	return id, remove
}

// installer returns a run function for CommitOnce that makes a container
// of the base the way a trial's install does, writes /installed in it, and
// counts its calls. Its containers are removed when the test ends.
func installer(t *testing.T, d *Docker, content string) (func(context.Context) (runtime.Container, error), *atomic.Int32) {
	var calls atomic.Int32
	return func(ctx context.Context) (runtime.Container, error) {
		calls.Add(1)
		id, _ := started(t, d, testImage)
		if out, code := shell(t, d, id, "printf '%s' '"+content+"' > /installed"); code != 0 {
			return d.Container(id), errors.New(out)
		}
		return d.Container(id), nil
	}, &calls
}

// TestCommitOnce: the first call runs the install and commits its
// container as troupe-stack:<key>, labelled, with the base image's
// configuration; concurrent and later calls reuse it; a failed install
// makes no image; with Rebuild the install runs again once per process and
// the image it replaces goes.
func TestCommitOnce(t *testing.T) {
	ctx := t.Context()
	d := newDocker(t)
	spec := runtime.CommitSpec{Base: testImage, Key: "sha256:test-" + runID + "-" + t.Name(), Labels: map[string]string{runtime.LabelJob: runID, "troupe.stack": "s"}}
	var tag string
	t.Cleanup(func() {
		if tag != "" {
			if err := d.RemoveImage(context.Background(), tag); err != nil {
				t.Error(err)
			}
		}
	})

	run, calls := installer(t, d, "one")
	var imgs [3]runtime.Image
	var made [3]bool
	var errs [3]error
	var wg sync.WaitGroup
	for i := range imgs {
		wg.Go(func() { imgs[i], made[i], errs[i] = d.CommitOnce(ctx, spec, run) })
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	tag = imgs[0].Ref
	nMade := 0
	for i := range imgs {
		if made[i] {
			nMade++
		}
		if imgs[i].Ref != tag {
			t.Errorf("refs %v", imgs)
		}
	}
	if n := calls.Load(); n != 1 || nMade != 1 || !strings.HasPrefix(tag, CommitTagPrefix) {
		t.Fatalf("three concurrent calls: %d installs, %d made, tag %s; want 1, 1, %s…", n, nMade, tag, CommitTagPrefix)
	}

	info, err := d.cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := d.cli.ImageInspect(ctx, testImage)
	l := info.Config.Labels
	if l[LabelBaseImage] != base.ID || l[LabelCommitKey] != spec.Key || l[runtime.LabelVersion] != runID || l["troupe.stack"] != "s" ||
		l[LabelCacheKey] == "" || !strings.HasPrefix(strings.TrimPrefix(tag, CommitTagPrefix), l[LabelCacheKey][:24]) {
		t.Errorf("labels %v", l)
	}
	for _, k := range containerOnly {
		if v, ok := l[k]; !ok || v != "" {
			t.Errorf("label %s: %q, want it blank", k, v)
		}
	}
	if len(info.Config.Entrypoint) != len(base.Config.Entrypoint) || strings.Join(info.Config.Cmd, " ") != strings.Join(base.Config.Cmd, " ") ||
		info.Config.User != base.Config.User {
		t.Errorf("config: entrypoint %v cmd %v user %q; the base's: %v %v %q", info.Config.Entrypoint, info.Config.Cmd, info.Config.User,
			base.Config.Entrypoint, base.Config.Cmd, base.Config.User)
	}

	// A container of the image holds what the install wrote.
	id, remove := started(t, d, tag)
	if out, _ := shell(t, d, id, "cat /installed"); out != "one" {
		t.Errorf("a container of the image: %q", out)
	}
	remove()
	if _, err := d.cli.ImageInspect(ctx, tag); err != nil {
		t.Fatal(err)
	}

	// A failing install makes nothing, and is said so.
	fail := func(ctx context.Context) (runtime.Container, error) { return nil, errors.New("the script exited 3") }
	other := spec
	other.Key += "-failing"
	if _, made, err := d.CommitOnce(ctx, other, fail); err == nil || made || err.Error() != "the script exited 3" {
		t.Errorf("a failing install: %v, made %v", err, made)
	}

	// Rebuild: once per process, replacing the old image.
	re := newDocker(t)
	re.Rebuild = true
	run2, calls2 := installer(t, re, "two")
	for range 2 {
		img, _, err := re.CommitOnce(ctx, spec, run2)
		if err != nil || img.Ref != tag {
			t.Fatalf("%s %v", img.Ref, err)
		}
	}
	after, err := d.cli.ImageInspect(ctx, tag)
	if n := calls2.Load(); err != nil || n != 1 || after.ID == info.ID {
		t.Errorf("with Rebuild, two calls: %d installs, image %s (was %s), %v; want 1 and a new image", n, after.ID, info.ID, err)
	}
	if _, err := d.cli.ImageInspect(ctx, info.ID); !cerrdefs.IsNotFound(err) {
		t.Errorf("the replaced image is still there: %v", err)
	}
}
