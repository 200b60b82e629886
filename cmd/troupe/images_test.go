package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/docker"
	"github.com/troupebench/troupe/runtime/kubernetes"
)

// labelTest marks what these tests create; its value is the test's own.
const labelTest = "troupe.test"

// testMarker is a value unique to one test.
func testMarker(t *testing.T) string {
	b := make([]byte, 4)
	rand.Read(b)
	return "images-" + hex.EncodeToString(b)
}

// writeTask writes a task folder: Harbor's files, with the Dockerfile
// given ("" for none) and extra task.toml lines.
func writeTask(t *testing.T, dir, dockerfile, toml string) {
	t.Helper()
	files := map[string]string{}
	harborTask(files, dir)
	files[dir+"/task.toml"] += toml
	delete(files, dir+"/environment/Dockerfile")
	if dockerfile != "" {
		files[dir+"/environment/Dockerfile"] = dockerfile
	}
	for path, body := range files {
		write(t, path, body)
	}
}

// engine is the Docker Engine's API client (testDocker's); cleanups run
// after the test's.
func engine(t *testing.T) *client.Client {
	t.Helper()
	return testDocker(t).Client()
}

// removeImages removes, when the test ends, the images labelled with the
// test's marker (with every name they have) and the images named refs.
// Base images (busybox) stay.
func removeImages(t *testing.T, cli *client.Client, marker string, refs ...*string) {
	t.Cleanup(func() {
		ctx := context.Background()
		imgs, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labelTest+"="+marker))})
		if err != nil {
			t.Errorf("list the test's images: %v", err)
		}
		for _, img := range imgs {
			if _, err := cli.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("remove %v: %v", img.RepoTags, err)
			}
		}
		for _, ref := range refs {
			if *ref == "" {
				continue
			}
			if _, err := cli.ImageRemove(ctx, *ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("remove %s: %v", *ref, err)
			}
		}
	})
}

// TestPlanImages: what images build makes of each kind of task, without
// building: a compose task's builds (main, then its sidecar, each its own
// name), a docker_image task skipped, a broken task refused.
func TestPlanImages(t *testing.T) {
	compose := repoPath(t, "trial/testdata/tasks/compose")
	dir := isolate(t)
	ds := filepath.Join(dir, "ds")
	writeTask(t, filepath.Join(ds, "image-only"), "", "[environment]\ndocker_image = \"example.invalid/never:1\"\n")
	writeTask(t, filepath.Join(ds, "both"), "FROM busybox:latest\n", "[environment]\ndocker_image = \"example.invalid/never:1\"\n")
	write(t, filepath.Join(ds, "broken", "task.toml"), "version = \"1.0\"\n")
	plan, err := planImages([]string{ds, compose}, "registry.example.com/troupe")
	if err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(compose, "environment")
	mainRef, _ := kubernetes.EnvironmentRef("registry.example.com/troupe", runtime.BuildSpec{Context: env})
	kvRef, _ := kubernetes.EnvironmentRef("registry.example.com/troupe", runtime.BuildSpec{Context: filepath.Join(env, "kv"), Dockerfile: "Dockerfile.kv"})
	bothRef, _ := kubernetes.EnvironmentRef("registry.example.com/troupe", runtime.BuildSpec{Context: filepath.Join(ds, "both", "environment")})
	var got []string
	for _, img := range plan {
		line := img.name + " " + img.ref + " " + img.build.Dockerfile
		switch {
		case img.refused != nil:
			line = img.name + " refused: " + img.refused.Error()
		case img.skip != "":
			line = img.name + " skipped: " + img.skip
		}
		got = append(got, line)
	}
	want := []string{
		"both " + bothRef + " ",
		"broken refused: ",
		"image-only skipped: it names only docker_image example.invalid/never:1 (no environment/Dockerfile): the cluster pulls that image itself",
		"compose " + mainRef + " ",
		"compose/kv " + kvRef + " Dockerfile.kv",
	}
	if len(got) != len(want) {
		t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
	if mainRef == kvRef || !strings.HasPrefix(mainRef, "registry.example.com/troupe/troupe-env:") {
		t.Errorf("refs %s %s", mainRef, kvRef)
	}
}

func TestImagesUsage(t *testing.T) {
	isolate(t)
	for _, tc := range []struct {
		args []string
		env  string // TROUPE_IMAGE_REPO
		says string
	}{
		{args: []string{"images", "build"}, says: "troupe images build needs a task folder or a folder of tasks"},
		{args: []string{"images", "build", "tasks", "--push"}, says: "--push needs --repo: troupe.local is no registry"},
		{args: []string{"images", "binary", "--repo", "troupe.local", "--push"}, says: "--push needs --repo"},
		{args: []string{"images", "binary", "--repo", "Registry.example.com/Troupe"}, says: `--repo "Registry.example.com/Troupe" is not an image repository`},
		{args: []string{"images", "binary", "extra"}, says: "unknown command"},
		{args: []string{"images", "build", "tasks"}, env: "bad repo", says: `--repo "bad repo" is not an image repository`},
	} {
		t.Setenv("TROUPE_IMAGE_REPO", tc.env)
		code, out, errOut := troupe(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.says) {
			t.Errorf("%v: exit %d, %q %q; want 2 and %q", tc.args, code, out, errOut, tc.says)
		}
	}
	// The config file's kubernetes: image_repo is troupe run's --image-repo
	// and images' --repo alike; the flag wins over it.
	t.Setenv("TROUPE_IMAGE_REPO", "")
	write(t, "troupe.yaml", "kubernetes:\n  image_repo: Bad/Repo\n")
	if code, _, errOut := troupe(t, "images", "binary"); code != exitUsage || !strings.Contains(errOut, `--repo "Bad/Repo" is not an image repository`) {
		t.Errorf("image_repo in the config file: exit %d %q", code, errOut)
	}
	if code, _, errOut := troupe(t, "images", "binary", "--repo", "troupe.local", "--push"); code != exitUsage || !strings.Contains(errOut, "--push needs --repo") {
		t.Errorf("--repo over the config file: exit %d %q", code, errOut)
	}

	_, out, _ := troupe(t, "images", "--help")
	for _, s := range []string{"cannot build images", "--image-repo", "troupe-env:<digest>", "troupe-bin:<digest>", "kind load docker-image", "ctr -n k8s.io images import", "docker push REF", "Examples:"} {
		if !strings.Contains(out, s) {
			t.Errorf("images --help does not say %q:\n%s", s, out)
		}
	}
}

// TestImagesBuild builds a dataset's environments with the real engine:
// each is named as the Kubernetes runtime looks for it; the docker_image
// task is skipped, the broken one refused, and a second run reuses.
func TestImagesBuild(t *testing.T) {
	dir := isolate(t)
	cli := engine(t)
	marker := testMarker(t)
	removeImages(t, cli, marker)
	ds := filepath.Join(dir, "ds")
	good := filepath.Join(ds, "good")
	writeTask(t, good, "FROM busybox:latest\nLABEL "+labelTest+"="+marker+"\nRUN echo "+marker+" > /built\n", "")
	writeTask(t, filepath.Join(ds, "image-only"), "", "[environment]\ndocker_image = \"example.invalid/never:1\"\n")
	write(t, filepath.Join(ds, "broken", "task.toml"), "version = \"1.0\"\n")
	ref, err := kubernetes.EnvironmentRef("", runtime.BuildSpec{Context: filepath.Join(good, "environment")})
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := troupe(t, "images", "build", ds)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1 (a task is refused)\n%s%s", code, out, errOut)
	}
	for _, line := range []string{
		"good        " + ref + "  built, load it into the cluster's nodes\n",
		"image-only  skipped: it names only docker_image example.invalid/never:1",
		"broken      refused:\n    ",
		"tests/test.sh is missing",
		"1 built, 0 reused, 1 skipped (docker_image only), 1 refused, 0 failed\n",
		"troupe.local is no registry: load the images into every node of the cluster, e.g.\n  kind load docker-image " + ref + "\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("the output lacks %q:\n%s", line, out)
		}
	}
	info, err := cli.ImageInspect(t.Context(), ref)
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	if l := info.Config.Labels; l[labelTest] != marker || l[docker.LabelCacheKey] == "" || l[runtime.LabelVersion] != shortVersion() {
		t.Errorf("%s is not the task's build: labels %v", ref, l)
	}
	if !strings.HasPrefix(ref, runtime.DefaultImageRepo+"/troupe-env:") || !hasTag(info.RepoTags, docker.ImageTagPrefix) {
		t.Errorf("%s has the names %v; want it and troupe's own troupe-env:<key>", ref, info.RepoTags)
	}

	code, out, errOut = troupe(t, "images", "build", good, "--repo", "troupe-test.local/"+marker)
	refInRepo, _ := kubernetes.EnvironmentRef("troupe-test.local/"+marker, runtime.BuildSpec{Context: filepath.Join(good, "environment")})
	if want := "good  " + refInRepo + "  reused, not pushed (--push pushes it)\n"; code != exitOK || !strings.HasPrefix(out, want) || strings.Contains(out, "kind load") {
		t.Errorf("again, in another repository: exit %d, want %q\n%s%s", code, want, out, errOut)
	}
	if again, err := cli.ImageInspect(t.Context(), refInRepo); err != nil || again.ID != info.ID {
		t.Errorf("%s: %v; want the image of %s", refInRepo, err, ref)
	}
}

func hasTag(tags []string, prefix string) bool {
	for _, tag := range tags {
		if strings.HasPrefix(tag, prefix) {
			return true
		}
	}
	return false
}

// TestImagesPushUnreachable: a push to a registry that does not answer
// fails; the line names the task and the image, says what failed and what
// to do. Nothing can be pushed here: no registry is reachable.
func TestImagesPushUnreachable(t *testing.T) {
	dir := isolate(t)
	t.Setenv("DOCKER_CONFIG", filepath.Join(dir, "docker"))
	cli := engine(t)
	marker := testMarker(t)
	removeImages(t, cli, marker)
	task := filepath.Join(dir, "pushed")
	writeTask(t, task, "FROM busybox:latest\nLABEL "+labelTest+"="+marker+"\n", "")
	ref, _ := kubernetes.EnvironmentRef("127.0.0.1:1/troupe", runtime.BuildSpec{Context: filepath.Join(task, "environment")})
	code, out, errOut := troupe(t, "images", "build", task, "--repo", "127.0.0.1:1/troupe", "--push")
	want := "pushed  " + ref + "  failed: docker: push " + ref + ": "
	if code != exitFailed || !strings.HasPrefix(out, want) || !strings.Contains(out, "127.0.0.1:1") ||
		!strings.Contains(out, "check that --repo 127.0.0.1:1/troupe names a registry this engine reaches") || !strings.Contains(out, "docker push "+ref) {
		t.Errorf("exit %d, want 1 and %q…\n%s%s", code, want, out, errOut)
	}
}

// TestImagesBinary puts troupe's static binary in an image under the name
// the Kubernetes runtime looks for, and runs it from there.
func TestImagesBinary(t *testing.T) {
	dir := isolate(t)
	t.Setenv("DOCKER_CONFIG", filepath.Join(dir, "docker"))
	cli := engine(t)
	marker := testMarker(t)
	repo := "troupe-test.local/" + marker
	var ref, unreachable string
	removeImages(t, cli, marker, &ref, &unreachable)
	bin, src, err := selfBinary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if src == "" {
		t.Skip("this test binary is static: it, not troupe, would go in the image (go test -race builds one that is not)")
	}
	ref, unreachable = runtime.BinaryImageRef(repo, bin), runtime.BinaryImageRef("127.0.0.1:1/troupe", bin)

	code, out, errOut := troupe(t, "images", "binary", "--repo", repo)
	if want := "troupe  " + ref + "  built, not pushed (--push pushes it)\n"; code != exitOK || !strings.HasPrefix(out, want) {
		t.Fatalf("exit %d, want %q\n%s%s", code, want, out, errOut)
	}
	info, err := cli.ImageInspect(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if l := info.Config.Labels; l[runtime.LabelVersion] != shortVersion() || l["troupe.binary"] != bin.SHA256 {
		t.Errorf("labels %v", l)
	}
	if got := runImage(t, cli, ref, marker, runtime.BinaryImagePath, "version"); !regexp.MustCompile(`^troupe \S+ \(.+, go1\.\S+, linux/amd64\)\n$`).MatchString(got) {
		t.Errorf("%s version printed %q", runtime.BinaryImagePath, got)
	}
	if code, out, _ = troupe(t, "images", "binary", "--repo", repo); code != exitOK || !strings.HasPrefix(out, "troupe  "+ref+"  reused") {
		t.Errorf("again: exit %d\n%s", code, out)
	}

	code, out, errOut = troupe(t, "images", "binary", "--repo", "127.0.0.1:1/troupe", "--push")
	if code != exitFailed || out != "" || !strings.Contains(errOut, "\ntroupe: docker: push "+unreachable+": ") || !strings.Contains(errOut, "docker push "+unreachable) {
		t.Errorf("push to nowhere: exit %d\n%s%s", code, out, errOut)
	}
}

// runImage runs a container of ref with the entrypoint given, without a
// network, and returns what it printed; the container is removed.
func runImage(t *testing.T, cli *client.Client, ref, marker string, entrypoint ...string) string {
	t.Helper()
	ctx := t.Context()
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Entrypoint: entrypoint, Labels: map[string]string{labelTest: marker}},
		&container.HostConfig{NetworkMode: container.NetworkMode(runtime.NetworkNone)}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Errorf("remove the container: %v", err)
		}
	})
	wait, errs := cli.ContainerWait(ctx, c.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-wait:
		if w.StatusCode != 0 {
			t.Errorf("%v exited with %d", entrypoint, w.StatusCode)
		}
	case err := <-errs:
		t.Fatal(err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, logs); err != nil {
		t.Fatal(err)
	}
	return stdout.String() + stderr.String()
}
