package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupebench/troupe/internal/yaml11"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/docker"
	"github.com/troupebench/troupe/runtime/kubernetes"
	"github.com/troupebench/troupe/trial"
)

// runtimes are the container backends --runtime names.
var runtimes = []string{"docker", "kubernetes"}

// kubeKeys are the Kubernetes backend's settings: flags, TROUPE_ variables
// and the config file's kubernetes: section, in that order of precedence.
var kubeKeys = []string{"kubeconfig", "kube_context", "namespace", "image_repo", "pending_timeout"}

// backend is a container backend as troupe's commands wire it: what a
// trial and its job need of it (trial.Backend), its life (Open, Close),
// the owner its resources are labelled with (the reaper's self) and troupe
// doctor's checks. runtime/docker and runtime/kubernetes implement it;
// openRuntime picks one, so no command knows a backend's type.
type backend interface {
	trial.Backend
	Open(ctx context.Context) error
	Close(ctx context.Context) error
	Owner() runtime.Owner
	Check(ctx context.Context, image string) []runtime.Check
}

// runtimeOptions are the settings of a backend that a command gives.
type runtimeOptions struct {
	// rebuild builds task environments again (troupe run --rebuild).
	rebuild bool
}

// runtimeFlag adds --runtime and the Kubernetes backend's flags, which run,
// replay, tasks check, doctor and clean share.
func runtimeFlag(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("runtime", "docker", "the container backend: "+strings.Join(runtimes, ", ")+" (docker: the local engine, or DOCKER_HOST's; kubernetes: a pod per trial, see docs/runtime.md)")
	f.String("kubeconfig", "", "kubernetes: the kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.String("kube-context", "", "kubernetes: the kubeconfig's context (default: its current one)")
	f.String("namespace", "", "kubernetes: the namespace of the trials' pods (default: the context's, else default)")
	f.String("image-repo", "", "kubernetes: where the images troupe names are, as troupe images build/binary --repo pushed them (default: "+runtime.DefaultImageRepo+", images loaded into the nodes)")
	f.Duration("pending-timeout", kubernetes.DefaultPendingTimeout, "kubernetes: how long a pod may stay Pending before its trial fails as an infrastructure failure")
}

// kubernetesConfig decodes the config file's kubernetes: section into
// settings, under the flags' keys.
func kubernetesConfig(d *yaml11.Decoder, settings map[string]any, dir string) []yaml11.Field {
	str := func(name, key string, path bool) yaml11.Field {
		return yaml11.Field{Name: name, Decode: func(n *yaml11.Node, p string) {
			if s, ok := d.String(n, p); ok {
				if path && s != "" && !filepath.IsAbs(s) {
					s = filepath.Join(dir, s)
				}
				settings[key] = s
			}
		}}
	}
	return []yaml11.Field{
		str("kubeconfig", "kubeconfig", true), str("context", "kube_context", false), str("namespace", "namespace", false),
		str("image_repo", "image_repo", false),
		{Name: "pending_timeout", Decode: func(n *yaml11.Node, p string) {
			if s, ok := d.String(n, p); ok {
				if _, err := time.ParseDuration(s); err != nil {
					d.Errorf(n, p, "must be a duration such as 3m: %v", err)
					return
				}
				settings["pending_timeout"] = s
			}
		}},
	}
}

// openRuntime makes and opens the backend --runtime names (or
// TROUPE_RUNTIME, or the config file's runtime).
func (a *app) openRuntime(ctx context.Context, cmd *cobra.Command, opts runtimeOptions) (backend, error) {
	v, err := a.settings(cmd, append([]string{"runtime"}, kubeKeys...)...)
	if err != nil {
		return nil, err
	}
	name := v.GetString("runtime")
	var rt backend
	switch name {
	case "", "docker":
		d := docker.New(shortVersion(), nil)
		d.Rebuild = opts.rebuild
		rt = d
	case "kubernetes":
		if opts.rebuild {
			return nil, &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--rebuild: a cluster does not build; rebuild with troupe images build --push")}
		}
		bin, _, err := selfBinary(ctx)
		if err != nil {
			return nil, err
		}
		rt = kubernetes.New(kubernetes.Options{
			Kubeconfig: v.GetString("kubeconfig"), Context: v.GetString("kube_context"), Namespace: v.GetString("namespace"),
			ImageRepo: v.GetString("image_repo"), PendingTimeout: v.GetDuration("pending_timeout"), Binary: bin,
		}, shortVersion(), nil)
	default:
		return nil, &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--runtime (or TROUPE_RUNTIME, or runtime: in the config file) %q is not a backend troupe has: %s", name, strings.Join(slices.Clone(runtimes), ", "))}
	}
	if err := rt.Open(ctx); err != nil {
		return nil, fmt.Errorf("%w\n(troupe doctor checks what trials need)", err)
	}
	return rt, nil
}
