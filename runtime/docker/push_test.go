package docker

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/troupebench/troupe/runtime"
)

func TestRegistryHost(t *testing.T) {
	for ref, want := range map[string]string{
		"busybox:latest":                         dockerHub,
		"me/troupe-env:abc":                      dockerHub,
		"docker.io/me/troupe-env:abc":            dockerHub,
		"registry.example.com/troupe/x:1":        "registry.example.com",
		"127.0.0.1:5000/troupe/troupe-bin:abc":   "127.0.0.1:5000",
		"localhost/troupe/x:1":                   "localhost",
		"Registry/x:1":                           "Registry",
		runtime.DefaultImageRepo + "/troupe-env": runtime.DefaultImageRepo,
	} {
		if got := registryHost(ref); got != want {
			t.Errorf("registryHost(%q) = %q, want %q", ref, got, want)
		}
	}
}

// TestRegistryAuth reads the Docker CLI's config as docker push would, and
// encodes what the engine expects in X-Registry-Auth.
func TestRegistryAuth(t *testing.T) {
	const ref = "registry.example.com/troupe/troupe-env:abc"
	userPass := "dXNlcjpzM2NyZXQ6d2l0aC1jb2xvbg==" // user:s3cret:with-colon
	cases := []struct {
		name   string
		config string // "" writes no config file
		ref    string
		want   registry.AuthConfig
		errHas []string // an error that says all of these
		helper bool     // an ErrCredentialHelper
	}{
		{name: "no config file", want: registry.AuthConfig{}},
		{name: "the registry's entry", config: `{"auths": {"registry.example.com": {"auth": "` + userPass + `"}}}`,
			want: registry.AuthConfig{Username: "user", Password: "s3cret:with-colon", ServerAddress: "registry.example.com"}},
		{name: "an entry as a URL", config: `{"auths": {"https://registry.example.com/v2/": {"auth": "` + userPass + `"}}}`,
			want: registry.AuthConfig{Username: "user", Password: "s3cret:with-colon", ServerAddress: "https://registry.example.com/v2/"}},
		{name: "Docker Hub", ref: "me/troupe-env:abc", config: `{"auths": {"https://index.docker.io/v1/": {"auth": "` + userPass + `"}}}`,
			want: registry.AuthConfig{Username: "user", Password: "s3cret:with-colon", ServerAddress: "https://index.docker.io/v1/"}},
		{name: "a port", ref: "127.0.0.1:5000/troupe/x:1", config: `{"auths": {"127.0.0.1:5000": {"auth": "` + userPass + `"}, "127.0.0.1": {"auth": "eDp5"}}}`,
			want: registry.AuthConfig{Username: "user", Password: "s3cret:with-colon", ServerAddress: "127.0.0.1:5000"}},
		{name: "an identity token", config: `{"auths": {"registry.example.com": {"identitytoken": "tok"}}}`,
			want: registry.AuthConfig{IdentityToken: "tok", ServerAddress: "registry.example.com"}},
		{name: "only other registries", config: `{"auths": {"ghcr.io": {"auth": "` + userPass + `"}}, "credHelpers": {"gcr.io": "gcloud"}}`,
			want: registry.AuthConfig{}},
		{name: "a store, and no login to this registry", config: `{"auths": {"ghcr.io": {}}, "credsStore": "desktop"}`,
			want: registry.AuthConfig{}},
		{name: "a store holds the login", config: `{"auths": {"registry.example.com": {}}, "credsStore": "desktop"}`,
			helper: true, errHas: []string{"troupe cannot use Docker credential helpers", "docker-credential-desktop", "config.json", "docker push " + ref}},
		{name: "a helper for this registry", config: `{"auths": {"registry.example.com": {"auth": "` + userPass + `"}}, "credHelpers": {"registry.example.com": "ecr-login"}}`,
			helper: true, errHas: []string{"registry.example.com are in docker-credential-ecr-login", "docker push " + ref}},
		{name: "not JSON", config: `{"auths": `, errHas: []string{"the Docker config", "config.json"}},
		{name: "auth not base64", config: `{"auths": {"registry.example.com": {"auth": "%%%"}}}`, errHas: []string{`auths["registry.example.com"].auth is not base64`}},
		{name: "auth without a colon", config: `{"auths": {"registry.example.com": {"auth": "dXNlcg=="}}}`, errHas: []string{"not base64 of user:password"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("DOCKER_CONFIG", dir)
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := registryAuth(cmp.Or(tc.ref, ref))
			if tc.errHas != nil {
				if err == nil {
					t.Fatalf("no error; X-Registry-Auth %s", got)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), strings.ReplaceAll(s, "config.json", filepath.Join(dir, "config.json"))) {
						t.Errorf("the error %q does not say %q", err, s)
					}
				}
				if errors.Is(err, ErrCredentialHelper) != tc.helper {
					t.Errorf("errors.Is(%v, ErrCredentialHelper) = %v", err, !tc.helper)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ac, err := registry.DecodeAuthConfig(got)
			if err != nil || *ac != tc.want {
				t.Errorf("X-Registry-Auth %s is %+v (%v), want %+v", got, ac, err, tc.want)
			}
		})
	}
}

// removeTag removes an image name made by a test; the image stays while
// another name holds it.
func removeTag(t *testing.T, d *Docker, ref string) {
	t.Cleanup(func() {
		if _, err := d.cli.ImageRemove(context.Background(), ref, image.RemoveOptions{}); err != nil {
			t.Errorf("remove the tag %s: %v", ref, err)
		}
	})
}

func TestBuildBinaryImage(t *testing.T) {
	d := newDocker(t)
	ctx := t.Context()
	ref := runtime.BinaryImageRef("troupe-test.local/"+runID, testBinary)
	reused, err := d.BuildBinaryImage(ctx, testBinary, ref)
	if err != nil || reused {
		t.Fatalf("first build: reused %v, %v", reused, err)
	}
	id := imageID(t, d, ref)
	info, err := d.cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if l := info.Config.Labels; l[runtime.LabelVersion] != runID || l[labelBinary] != testBinary.SHA256 {
		t.Errorf("labels %v", l)
	}
	if len(info.RootFS.Layers) != 1 || len(info.Config.Entrypoint) != 0 {
		t.Errorf("want one layer (the binary) and no entrypoint: %+v %q", info.RootFS.Layers, info.Config.Entrypoint)
	}
	reused, err = d.BuildBinaryImage(ctx, testBinary, ref)
	if err != nil || !reused {
		t.Errorf("second build: reused %v, %v", reused, err)
	}
	if again := imageIDOf(t, d, ref); again != id {
		t.Errorf("the image changed: %s, was %s", again, id)
	}

	// A name held by another image moves to the binary's; that image stays.
	other := ref + "-other"
	if err := d.Tag(ctx, testImage, other); err != nil {
		t.Fatal(err)
	}
	if reused, err := d.BuildBinaryImage(ctx, testBinary, other); err != nil || reused {
		t.Fatalf("over another image's name: reused %v, %v", reused, err)
	}
	removeTag(t, d, other)
	if got := imageIDOf(t, d, other); got != id || !d.exists(ctx, testImage) {
		t.Errorf("%s is %s, want %s; %s exists: %v", other, got, id, testImage, d.exists(ctx, testImage))
	}

	// The binary, its mode and the entrypoint the Kubernetes backend gives
	// its init container: a created container's files, read back.
	c, err := d.cli.ContainerCreate(ctx, &container.Config{Image: ref, Entrypoint: []string{runtime.BinaryImagePath, "version"},
		Labels: map[string]string{runtime.LabelJob: runID, "troupe.test": "images"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove(context.Background(), runtime.Resource{Kind: runtime.KindContainer, ID: c.ID})
	st, err := d.cli.ContainerStatPath(ctx, c.ID, runtime.BinaryImagePath)
	if err != nil || st.Mode.Perm() != 0o755 || st.Size != int64(len(testBinary.Data)) {
		t.Errorf("%s in the image: %+v %v", runtime.BinaryImagePath, st, err)
	}
}

func imageIDOf(t *testing.T, d *Docker, ref string) string {
	t.Helper()
	info, err := d.cli.ImageInspect(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}

// TestPushUnreachable: a push to a registry nobody runs fails, and the
// error names the image and what failed.
func TestPushUnreachable(t *testing.T) {
	d := newDocker(t)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	ref := "127.0.0.1:1/troupe-test/" + runID + ":push"
	if err := d.Tag(t.Context(), testImage, ref); err != nil {
		t.Fatal(err)
	}
	removeTag(t, d, ref)
	err := d.Push(t.Context(), ref, nil)
	if err == nil || !strings.Contains(err.Error(), "docker: push "+ref+": ") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("push to nowhere: %v", err)
	}
	t.Log(err)
	if err := d.Tag(t.Context(), "troupe-test/no-such-image:"+runID, ref+"x"); err == nil || !strings.Contains(err.Error(), "troupe-test/no-such-image") {
		t.Errorf("tag of no image: %v", err)
	}
}
