package runtime

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
)

// DefaultImageRepo is the repository of the images troupe names itself
// (built task environments, troupe's binary) when no registry is given: a
// name no registry answers to, for images loaded into a cluster's nodes.
const DefaultImageRepo = "troupe.local"

// EnvironmentRef is the name a built task environment has on a backend that
// cannot build (Kubernetes): repo/troupe-env:<digest of the folder and
// Dockerfile>. troupe images build tags and pushes an environment under it,
// and the backend looks for it there, so both sides agree on the name
// without asking each other. repo "" is DefaultImageRepo.
func EnvironmentRef(repo string, b BuildSpec) (string, error) {
	digest, err := DirDigest(b.Context)
	if err != nil {
		return "", err
	}
	if name := cmp.Or(b.Dockerfile, "Dockerfile"); name != "Dockerfile" {
		// One folder, two Dockerfiles: two images.
		sum := sha256.Sum256([]byte(digest + ":" + filepath.ToSlash(name)))
		digest = hex.EncodeToString(sum[:])
	}
	return imageRepo(repo) + "/troupe-env:" + digest[:24], nil
}

// BinaryImageRef is the name of the image that holds troupe's binary b at
// /troupe (FROM scratch): repo/troupe-bin:<digest>. A backend that cannot
// share a volume with every container (Kubernetes) copies the binary out of
// it in an init container, once per pod, from the node's image cache.
func BinaryImageRef(repo string, b *Binary) string {
	return imageRepo(repo) + "/troupe-bin:" + b.SHA256[:24]
}

// BinaryImagePath is where troupe's binary is in its image.
const BinaryImagePath = "/troupe"

func imageRepo(repo string) string {
	return strings.TrimSuffix(cmp.Or(repo, DefaultImageRepo), "/")
}
