package task

import (
	"path"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// HostMount is a compose service's bind of a host path (a folder or a
// file), as Harbor hands it to docker compose: `- ${HOME}/.config/gcloud:
// /root/.config/gcloud`. A task with one loads; a trial mounts it only
// when the user allows its path (troupe run --allow-host-path), and
// read-only unless the user allows writes there.
type HostMount struct {
	// Service is the compose service that binds it (MainService for the
	// trial container).
	Service string
	// Source is the host path as the compose file makes it: variables
	// interpolated as compose does, a relative path made absolute against
	// environment/, cleaned; links are not resolved here.
	Source string
	// Target is the absolute path in the service's container.
	Target string
	// ReadOnly is the compose file's own ":ro" (read_only).
	ReadOnly bool
}

// HostMounts lists every host path the task's compose file binds, the
// main service's first, then each sidecar's in start order.
func (t *Task) HostMounts() []HostMount {
	if t.Compose == nil {
		return nil
	}
	out := append([]HostMount(nil), t.Compose.Main.HostMounts...)
	for _, s := range t.Compose.Sidecars {
		out = append(out, s.HostMounts...)
	}
	return out
}

// volume checks one entry of a service's volumes: a bind of a host path
// is kept (for the user to allow or not); a volume of any other kind is
// refused, saying what troupe does instead.
func (c *serviceCheck) volume(v types.ServiceVolumeConfig) {
	where := v.Target
	if v.Source != "" {
		where = v.Source + ":" + v.Target
	}
	switch {
	case c.main && (v.Source == hostLogs || strings.HasPrefix(v.Source, hostLogs+"/")):
		return // Harbor's log mounts: troupe copies logs out
	case v.Type == types.VolumeTypeVolume && v.Source == "":
		c.refuse("volumes", "%s: an anonymous volume is not supported: a trial keeps nothing beyond its container's filesystem; leave it out (the path is then the image's)", v.Target)
	case v.Type == types.VolumeTypeVolume:
		c.refuse("volumes", "%s: named volume %q is not supported: a trial gets no volume (and shares none with another); bind a host folder instead (allowed with troupe run --allow-host-path) or build the files into the image", where, v.Source)
	case v.Type != types.VolumeTypeBind:
		c.refuse("volumes", "%s: a %s volume is not supported: troupe binds host paths only", where, v.Type)
	case !path.IsAbs(v.Target):
		c.refuse("volumes", "%s: the target must be an absolute path in the container", where)
	case v.Bind != nil && (v.Bind.SELinux != "" || v.Bind.Propagation != "" && v.Bind.Propagation != "rprivate"):
		c.refuse("volumes", "%s: bind options selinux and propagation are not supported: troupe neither relabels nor shares a host path's mounts", where)
	default:
		c.mounts = append(c.mounts, HostMount{Service: c.name, Source: filepath.Clean(v.Source), Target: path.Clean(v.Target), ReadOnly: v.ReadOnly})
	}
}
