package kubernetes

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task/taskfs"
)

// EnvironmentRef is the name a built task environment has on a backend that
// cannot build (this one): repo/troupe-env:<digest of the folder and
// Dockerfile>. troupe images build tags and pushes an environment under it,
// and the backend looks for it there, so both sides agree on the name
// without asking each other. repo "" is runtime.DefaultImageRepo.
func EnvironmentRef(repo string, b runtime.BuildSpec) (string, error) {
	digest, err := taskfs.Digest(b.Context)
	if err != nil {
		return "", err
	}
	if name := cmp.Or(b.Dockerfile, "Dockerfile"); name != "Dockerfile" {
		// One folder, two Dockerfiles: two images.
		sum := sha256.Sum256([]byte(digest + ":" + filepath.ToSlash(name)))
		digest = hex.EncodeToString(sum[:])
	}
	return runtime.ImageRepo(repo) + "/troupe-env:" + digest[:24], nil
}

// ErrImageUnavailable is an image the cluster's nodes do not have and
// cannot pull.
var ErrImageUnavailable = errors.New("image not available to the cluster")

// imageCache keeps one probe per image: what it found, or that the image
// is not to be had, for the process's life; any other failure only until
// the probe ends.
type imageCache struct {
	mu sync.Mutex
	m  map[string]*imageProbe
}

type imageProbe struct {
	done chan struct{} // closed when img and err are set
	img  runtime.Image
	err  error
}

// probeScript prints the uid, gid and working folder the image runs with
// (its USER and WORKDIR), which the cluster does not tell.
const probeScript = `echo "$(id -u):$(id -g)"; pwd`

// Image finds the image a task names on the cluster and reads its USER and
// WORKDIR from a short pod that prints them (and runs troupe's binary
// image beside it, so a missing binary image is found here, once). A task with only a Dockerfile
// is looked for under EnvironmentRef: a cluster cannot build, so
// troupe images build must have built and pushed (or loaded) it.
func (k *Kubernetes) Image(ctx context.Context, spec runtime.ImageSpec) (runtime.Image, error) {
	var refs []string
	if spec.Image != "" {
		refs = append(refs, spec.Image)
	}
	if spec.Build != nil {
		ref, err := EnvironmentRef(k.opts.ImageRepo, *spec.Build)
		if err != nil {
			return runtime.Image{}, fmt.Errorf("kubernetes: %w", err)
		}
		refs = append(refs, ref)
	}
	if len(refs) == 0 {
		return runtime.Image{}, errors.New("kubernetes: the task names no image and no environment to build")
	}
	var errs []error
	for _, ref := range refs {
		img, err := k.probe(ctx, ref)
		if err == nil {
			return img, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, ErrImageUnavailable) {
			break
		}
	}
	err := errors.Join(errs...)
	if spec.Build != nil && errors.Is(err, ErrImageUnavailable) {
		return runtime.Image{}, fmt.Errorf("%w\na cluster cannot build the task's environment (%s): build it with the local Docker Engine and push it, "+
			"troupe images build TASK_DIR --repo REPO --push, then run with --image-repo REPO; or load %s into the cluster's nodes", err, spec.Build.Context, refs[len(refs)-1])
	}
	return runtime.Image{}, err
}

// probe finds what the image's probe found, running it once for all the
// trials that wait for it. It runs on the backend's own context, not the
// first caller's: a trial cancelled meanwhile must not fail the others.
func (k *Kubernetes) probe(ctx context.Context, ref string) (runtime.Image, error) {
	k.images.mu.Lock()
	pr := k.images.m[ref]
	if pr == nil {
		pr = &imageProbe{done: make(chan struct{})}
		k.images.m[ref] = pr
		k.probes.Go(func() {
			defer close(pr.done)
			pctx, cancel := context.WithTimeout(k.life, k.probeBound()+RemoveTimeout)
			defer cancel()
			pr.img, pr.err = k.runProbe(pctx, ref)
			if pr.err != nil && !errors.Is(pr.err, ErrImageUnavailable) {
				k.images.mu.Lock()
				delete(k.images.m, ref) // the next asks again
				k.images.mu.Unlock()
			}
		})
	}
	k.images.mu.Unlock()
	select {
	case <-pr.done:
		return pr.img, pr.err
	case <-ctx.Done():
		return runtime.Image{}, fmt.Errorf("kubernetes: waiting for the probe of %s: %w", ref, ctx.Err())
	}
}

// probeMinPending is the least time an image's probe pod may take to run
// to its end. A --pending-timeout of seconds is meant for trial pods that
// cannot be scheduled; the probe asks for no resources, and failing it
// because a loaded node started it slowly would fail its trial as infra
// for nothing.
const probeMinPending = 30 * time.Second

// probeBound bounds a probe pod's time Pending and running.
func (k *Kubernetes) probeBound() time.Duration {
	return max(cmp.Or(k.opts.PendingTimeout, DefaultPendingTimeout), probeMinPending)
}

// runProbe runs the probe pod to its end and reads what it printed.
func (k *Kubernetes) runProbe(ctx context.Context, ref string) (runtime.Image, error) {
	labels := k.labels(map[string]string{"troupe.probe": "image"})
	name := podName(map[string]string{runtime.LabelTrial: "image-probe"})
	m, err := meta(name, labels)
	if err != nil {
		return runtime.Image{}, err
	}
	p := &corev1.Pod{
		ObjectMeta: m,
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr(false), EnableServiceLinks: ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(0)),
			Containers: []corev1.Container{{
				Name: mainContainer, Image: ref, ImagePullPolicy: pullPolicy(ref),
				Command: []string{"/bin/sh", "-c", probeScript},
			},
				// troupe's binary image too, beside it (an init container
				// would delay the main one's image errors by seconds): a
				// cluster without it fails here, once, not in every trial.
				k.helper(binContainer, []string{runtime.BinaryImagePath, "version"}, false),
			},
		},
	}
	pods := k.cs.CoreV1().Pods(k.namespace)
	// Before the create: a create cut short may still have made the pod.
	defer k.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: name})
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return runtime.Image{}, fmt.Errorf("kubernetes: create a pod from %s: %w", ref, err)
	}
	bound := k.probeBound()
	got, err := k.waitPod(ctx, name, bound, func(p *corev1.Pod) (bool, error) {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return true, nil
		}
		if why := stuck(p); why != "" {
			if strings.Contains(why, "container "+binContainer) {
				return false, fmt.Errorf("kubernetes: %s", why)
			}
			if strings.Contains(why, "image ") {
				return false, fmt.Errorf("kubernetes: %w: %s: %s", ErrImageUnavailable, ref, why)
			}
			return false, fmt.Errorf("kubernetes: a pod from %s cannot start: %s", ref, why)
		}
		return false, nil
	})
	if errors.Is(err, errPending) {
		return runtime.Image{}, fmt.Errorf("kubernetes: a pod from %s was still Pending after %s: %s", ref, bound, k.why(ctx, got))
	}
	if err != nil {
		return runtime.Image{}, err
	}
	return k.probeResult(ctx, ref, got)
}

// probeResult reads the probe's output: "uid:gid" and the working folder.
// An image without a shell or id runs as what its pod ran as, unknown:
// root and its default folder are assumed, and said.
func (k *Kubernetes) probeResult(ctx context.Context, ref string, p *corev1.Pod) (runtime.Image, error) {
	out, err := k.cs.CoreV1().Pods(k.namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: mainContainer}).DoRaw(ctx)
	if err != nil {
		return runtime.Image{}, fmt.Errorf("kubernetes: read what a pod from %s printed: %w", ref, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if p.Status.Phase != corev1.PodSucceeded || len(lines) != 2 || !strings.Contains(lines[0], ":") {
		k.logger.Warn("kubernetes: cannot read the image's user and working folder (it has no /bin/sh or id?): assuming root and its default folder", "image", ref, "output", string(out))
		return runtime.Image{Ref: ref}, nil
	}
	img := runtime.Image{Ref: ref, User: lines[0], WorkDir: lines[1]}
	if img.User == "0:0" {
		img.User = ""
	}
	if img.WorkDir == "/" {
		img.WorkDir = "" // what Docker reports of an image without WORKDIR
	}
	return img, nil
}
