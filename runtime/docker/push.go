package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/troupebench/troupe/runtime"
)

// This file makes the images a backend that cannot build (Kubernetes)
// needs, on this engine, and sends them to a registry: troupe images.

// BuildEnvironment resolves a task environment as Image does — built with
// troupe's cache key and tagged troupe-env:<key>, or found built from the
// same inputs — and says whether it built it now.
func (d *Docker) BuildEnvironment(ctx context.Context, b runtime.BuildSpec) (tag string, built bool, err error) {
	tag, _, built, err = d.build(ctx, b.Context, b.Dockerfile)
	return tag, built, err
}

// Tag gives the local image src the name ref as well.
func (d *Docker) Tag(ctx context.Context, src, ref string) error {
	if err := d.cli.ImageTag(ctx, src, ref); err != nil {
		return fmt.Errorf("docker: tag %s as %s: %w", src, ref, err)
	}
	return nil
}

// binaryDockerfile puts troupe's binary, alone, in an image.
const binaryDockerfile = "FROM scratch\nCOPY troupe " + runtime.BinaryImagePath + "\n"

// BuildBinaryImage makes the image ref holding troupe's binary bin at
// runtime.BinaryImagePath, FROM scratch, labelled with troupe's version and
// the binary's digest. An image already tagged ref that holds bin (its
// troupe.binary label says so) is kept: reused is then true.
func (d *Docker) BuildBinaryImage(ctx context.Context, bin *runtime.Binary, ref string) (reused bool, err error) {
	old, err := d.cli.ImageInspect(ctx, ref)
	switch {
	case err == nil && old.Config != nil && old.Config.Labels[labelBinary] == bin.SHA256:
		return true, nil
	case err != nil && !cerrdefs.IsNotFound(err):
		return false, fmt.Errorf("docker: inspect image %s: %w", ref, err)
	}
	files := []runtime.File{
		{Path: "/Dockerfile", Data: []byte(binaryDockerfile), Mode: 0o644},
		{Path: "/troupe", Data: bin.Data, Mode: 0o755},
	}
	err = d.runBuild(ctx, "troupe's binary image "+ref, func(w io.Writer) error { return runtime.WriteTar(w, files) }, build.ImageBuildOptions{
		Tags:   []string{ref},
		Labels: map[string]string{runtime.LabelVersion: d.version, labelBinary: bin.SHA256},
	})
	// An image the tag held before is left as it is: it may be anyone's
	// (removing an image by ID also removes its one other name).
	return false, err
}

// ErrCredentialHelper means the Docker CLI keeps a registry's credentials
// in a credential helper (credsStore, credHelpers), which troupe does not
// run: docker push can push the image.
var ErrCredentialHelper = errors.New("troupe cannot use Docker credential helpers")

// Push pushes the local image ref to its registry, with the credentials
// the Docker CLI's config file holds for that registry (none when it holds
// none), and writes the registry's progress lines to progress (nil
// discards them). A refusal the registry reports in the push's stream is
// an error with its message.
func (d *Docker) Push(ctx context.Context, ref string, progress io.Writer) error {
	auth, err := registryAuth(ref)
	if err != nil {
		return fmt.Errorf("docker: push %s: %w", ref, err)
	}
	rc, err := d.cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		return fmt.Errorf("docker: push %s: %w", ref, err)
	}
	defer rc.Close()
	if progress == nil {
		progress = io.Discard
	}
	if err := jsonmessage.DisplayJSONMessagesStream(rc, progress, 0, false, nil); err != nil {
		return fmt.Errorf("docker: push %s: %w", ref, err)
	}
	return nil
}

// registryAuth is the X-Registry-Auth value for pushing ref: the
// credentials of ref's registry in the Docker CLI's config file
// ($DOCKER_CONFIG/config.json, else ~/.docker/config.json), base64url
// JSON. Without a config file, or an entry for the registry, it is an
// anonymous one: the engine wants the header even then.
func registryAuth(ref string) (string, error) {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return registry.EncodeAuthConfig(registry.AuthConfig{})
		}
		dir = filepath.Join(home, ".docker")
	}
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return registry.EncodeAuthConfig(registry.AuthConfig{})
	}
	if err != nil {
		return "", fmt.Errorf("the Docker config: %w", err)
	}
	host := registryHost(ref)
	ac, err := parseAuth(data, host)
	if errors.Is(err, ErrCredentialHelper) {
		return "", fmt.Errorf("%w (%s says so): push it with docker push %s instead", err, path, ref)
	}
	if err != nil {
		return "", fmt.Errorf("the Docker config %s: %w", path, err)
	}
	return registry.EncodeAuthConfig(ac)
}

// dockerConfig is the part of the Docker CLI's config.json that holds
// credentials.
type dockerConfig struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		IdentityToken string `json:"identitytoken"`
	} `json:"auths"`
	CredsStore  string            `json:"credsStore"`
	CredHelpers map[string]string `json:"credHelpers"`
}

// parseAuth reads the credentials of the registry host from a Docker
// config file: its auths entry ("auth" is base64 user:password, or an
// identity token). A registry whose credentials a helper keeps
// (credHelpers, or credsStore with an entry for it) is ErrCredentialHelper.
// No entry is an anonymous AuthConfig.
func parseAuth(data []byte, host string) (registry.AuthConfig, error) {
	var none registry.AuthConfig
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return none, err
	}
	for key, helper := range cfg.CredHelpers {
		if configHost(key) == host && helper != "" {
			return none, fmt.Errorf("%w, and the credentials of %s are in docker-credential-%s", ErrCredentialHelper, host, helper)
		}
	}
	for key, entry := range cfg.Auths {
		if configHost(key) != host {
			continue
		}
		if cfg.CredsStore != "" {
			// docker login leaves an empty entry here and the secret in
			// the store.
			return none, fmt.Errorf("%w, and the credentials of %s are in docker-credential-%s", ErrCredentialHelper, host, cfg.CredsStore)
		}
		ac := registry.AuthConfig{ServerAddress: key, IdentityToken: entry.IdentityToken}
		if entry.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(entry.Auth)
			if err != nil {
				return none, fmt.Errorf("auths[%q].auth is not base64: %w", key, err)
			}
			user, password, ok := strings.Cut(string(raw), ":")
			if !ok {
				return none, fmt.Errorf("auths[%q].auth is not base64 of user:password", key)
			}
			ac.Username, ac.Password = user, password
		}
		return ac, nil
	}
	return none, nil
}

// dockerHub is the host Docker Hub's credentials are kept under.
const dockerHub = "index.docker.io"

// registryHost is the registry an image name is pushed to, as the Docker
// CLI reads it: the first part of the name when it looks like a host (a
// dot, a port, localhost or a capital letter in it), else Docker Hub.
func registryHost(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	if !ok || !strings.ContainsAny(first, ".:") && first != "localhost" && strings.ToLower(first) == first {
		return dockerHub
	}
	return configHost(first)
}

// configHost is the host a key of the config's auths names: a host, or a
// URL ("https://index.docker.io/v1/").
func configHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key, _, _ = strings.Cut(key, "/")
	switch key {
	case "docker.io", "registry-1.docker.io":
		return dockerHub
	}
	return key
}
