package runtime

import (
	"cmp"
	"strings"
)

// DefaultImageRepo is the repository of the images troupe names itself
// (built task environments, troupe's binary) when no registry is given: a
// name no registry answers to, for images loaded into a cluster's nodes.
const DefaultImageRepo = "troupe.local"

// BinaryImageRef is the name of the image that holds troupe's binary b at
// /troupe (FROM scratch): repo/troupe-bin:<digest>. A backend that cannot
// share a volume with every container (Kubernetes) copies the binary out of
// it in an init container, once per pod, from the node's image cache.
func BinaryImageRef(repo string, b *Binary) string {
	return ImageRepo(repo) + "/troupe-bin:" + b.SHA256[:24]
}

// BinaryImagePath is where troupe's binary is in its image.
const BinaryImagePath = "/troupe"

// ImageRepo is the repository the images troupe names are in: repo,
// without a trailing slash, or DefaultImageRepo when it is "".
func ImageRepo(repo string) string {
	return strings.TrimSuffix(cmp.Or(repo, DefaultImageRepo), "/")
}
