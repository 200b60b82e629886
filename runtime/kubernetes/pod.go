package kubernetes

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/troupebench/troupe/runtime"
)

// Names of the containers and the volume of a trial pod.
const (
	mainContainer   = "main"
	binContainer    = "troupe-bin"
	binVolume       = "troupe-bin"
	gracePeriodSecs = 2
)

// pod is a trial container, the handle Create returns: its spec until
// Start makes it, then its network state.
type pod struct {
	k    *Kubernetes
	name string
	spec runtime.ContainerSpec
	meta metav1.ObjectMeta

	// made: the pod exists, or its create was sent; removed: Remove was
	// called. Both are read without mu, so that Remove never waits for a
	// Start that waits for the pod; whichever of the two comes second
	// deletes what Start made.
	made, removed atomic.Bool

	mu      sync.Mutex
	started bool           // it runs and its pending files are in
	files   []runtime.File // CopyIn before Start
	online  bool           // NetworkBridge and online
	routes  string         // the routes link down took away, for link up
	netSeq  int            // ephemeral containers made, to name the next
}

var _ runtime.Container = (*pod)(nil)

// markRemoved marks the pod removed and reports whether Start made (or is
// making) it, for Remove to delete.
func (p *pod) markRemoved() bool {
	p.removed.Store(true)
	return p.made.Load()
}

// ID is the pod's name.
func (p *pod) ID() string { return p.name }

// Remove deletes the pod, with its NetworkPolicy (Kubernetes.Remove).
func (p *pod) Remove(ctx context.Context) error {
	return p.k.Remove(ctx, runtime.Resource{Kind: runtime.KindContainer, ID: p.name})
}

// gone says a pod that Remove has removed is no longer this process's.
func (p *pod) gone() error {
	if p.removed.Load() {
		return fmt.Errorf("kubernetes: no pod %s made by this process", p.name)
	}
	return nil
}

// Create checks the spec and keeps it: the pod is made by Start, since a
// pod cannot exist without running.
func (k *Kubernetes) Create(ctx context.Context, spec runtime.ContainerSpec) (runtime.Container, error) {
	switch {
	case len(spec.Services) > 0:
		return nil, errors.New("kubernetes: a task with a compose environment (services) runs on the docker runtime only: each service would be a pod of its own, which troupe does not make yet")
	case len(spec.Mounts) > 0:
		return nil, fmt.Errorf("kubernetes: the task binds host path %s: a pod runs on a node, not on this host, so it runs on the docker runtime only", spec.Mounts[0].Source)
	case spec.Network != "" && spec.Network != runtime.NetworkNone && spec.Network != runtime.NetworkBridge:
		return nil, fmt.Errorf("kubernetes: network mode %q is not %s or %s", spec.Network, runtime.NetworkNone, runtime.NetworkBridge)
	case spec.Binary != nil && spec.Binary.SHA256 != k.opts.Binary.SHA256:
		return nil, fmt.Errorf("kubernetes: the container asks for troupe binary %.12s, the backend's pods get %.12s (from %s)", spec.Binary.SHA256, k.opts.Binary.SHA256, k.binImage)
	}
	labels := k.labels(spec.Labels)
	name := podName(labels)
	labels[labelPod] = name
	m, err := meta(name, labels)
	if err != nil {
		return nil, err
	}
	p := &pod{k: k, name: name, spec: spec, meta: m, online: spec.Network == runtime.NetworkBridge}
	k.mu.Lock()
	k.pods[name] = p
	k.mu.Unlock()
	return p, nil
}

// Start makes the pod (and its NetworkPolicy when it starts offline),
// waits for it to run, and copies in the files CopyIn was given.
func (p *pod) Start(ctx context.Context) error {
	if err := p.gone(); err != nil {
		return err
	}
	k, id := p.k, p.name
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.made.Load() || p.removed.Load() {
		return fmt.Errorf("kubernetes: pod %s is already started or removed", id)
	}
	spec, err := k.podSpec(p)
	if err != nil {
		return err
	}
	p.made.Store(true)
	if !p.online {
		if err := k.createPolicy(ctx, p); err != nil {
			return err
		}
	}
	created, err := k.cs.CoreV1().Pods(k.namespace).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes: create pod %s from %s: %w", id, p.spec.Image, err)
	}
	if p.removed.Load() {
		// Removed while it was being made: what Remove may have missed.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
		defer cancel()
		return errors.Join(fmt.Errorf("kubernetes: pod %s was removed while it started", id), k.deletePod(rctx, id), k.deletePolicy(rctx, id))
	}
	if !p.online {
		k.ownPolicy(ctx, created)
	}
	running, err := k.waitRunning(ctx, id)
	if err != nil {
		return err
	}
	if !p.online {
		p.routes = terminationMessage(running.Status.InitContainerStatuses, binContainer)
	}
	if len(p.files) > 0 {
		if err := k.unpack(ctx, id, p.files); err != nil {
			return err
		}
		p.files = nil
	}
	p.started = true
	return nil
}

// podSpec is the pod of a trial container: troupe's binary copied in by an
// init container, offline (when it starts so) by another, PID 1 the
// spec's entrypoint (troupe init), no service account token, no service
// links, and a short grace period: troupe init ends on TERM at once.
func (k *Kubernetes) podSpec(p *pod) (*corev1.Pod, error) {
	s := p.spec
	ctr := corev1.Container{
		Name: mainContainer, Image: s.Image, ImagePullPolicy: pullPolicy(s.Image),
		Command: s.Entrypoint, Args: s.Cmd, WorkingDir: s.WorkDir, Env: envVars(s.Env),
		VolumeMounts: []corev1.VolumeMount{{Name: binVolume, MountPath: binDir(), ReadOnly: true}},
		SecurityContext: &corev1.SecurityContext{
			// A process cannot gain privileges (setuid) that it was not
			// started with: agents stay the users they were launched as.
			AllowPrivilegeEscalation: ptr(false),
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Resources: resources(s),
	}
	if s.User != "" {
		uid, gid, err := numericUser(s.User)
		if err != nil {
			return nil, err
		}
		ctr.SecurityContext.RunAsUser, ctr.SecurityContext.RunAsGroup = &uid, gid
	}
	return &corev1.Pod{
		ObjectMeta: p.meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(gracePeriodSecs)),
			InitContainers:                []corev1.Container{k.binaryInit(!p.online)},
			Containers:                    []corev1.Container{ctr},
			Volumes:                       []corev1.Volume{binaryVolume()},
		},
	}, nil
}

// binaryInit is a pod's one init container (the kubelet notices each
// one's end on its next relist, about a second later): troupe's binary
// copied into the pod's binary volume, and with offline the pod's
// interfaces set down.
func (k *Kubernetes) binaryInit(offline bool) corev1.Container {
	cmd := []string{runtime.BinaryImagePath, "copy-self", runtime.BinaryPath}
	if offline {
		cmd = append(cmd, "--link-down")
	}
	c := k.helper(binContainer, cmd, offline)
	c.VolumeMounts = []corev1.VolumeMount{{Name: binVolume, MountPath: binDir()}}
	return c
}

// binaryVolume holds troupe's binary in a pod.
func binaryVolume() corev1.Volume {
	return corev1.Volume{Name: binVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// helper is a container of troupe's binary image running one of its
// commands as root, with NET_ADMIN when it changes the pod's network.
func (k *Kubernetes) helper(name string, cmd []string, netAdmin bool) corev1.Container {
	sc := &corev1.SecurityContext{RunAsUser: ptr(int64(0)), RunAsGroup: ptr(int64(0)), AllowPrivilegeEscalation: ptr(false)}
	if netAdmin {
		sc.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}
	}
	return corev1.Container{
		Name: name, Image: k.binImage, ImagePullPolicy: pullPolicy(k.binImage), Command: cmd,
		SecurityContext: sc, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
}

func binDir() string { return runtime.BinaryPath[:strings.LastIndexByte(runtime.BinaryPath, '/')] }

func ptr[T any](v T) *T { return &v }

func envVars(env []string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, kv := range env {
		key, v, _ := strings.Cut(kv, "=")
		out = append(out, corev1.EnvVar{Name: key, Value: v})
	}
	return out
}

// resources asks for what the task limits the container to, so the
// scheduler places a pod where it fits.
func resources(s runtime.ContainerSpec) corev1.ResourceRequirements {
	list := corev1.ResourceList{}
	if s.CPUs > 0 {
		list[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(s.CPUs*1000), resource.DecimalSI)
	}
	if s.MemoryMB > 0 {
		list[corev1.ResourceMemory] = *resource.NewQuantity(s.MemoryMB<<20, resource.BinarySI)
	}
	if len(list) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Limits: list, Requests: list}
}

// numericUser reads a container's user: a pod runs as uids, not names.
func numericUser(spec string) (int64, *int64, error) {
	u, g, hasGroup := strings.Cut(spec, ":")
	uid, err := strconv.ParseInt(u, 10, 64)
	if err != nil || uid < 0 {
		return 0, nil, fmt.Errorf("kubernetes: container user %q: a pod runs as a numeric uid[:gid]", spec)
	}
	if !hasGroup {
		return uid, nil, nil
	}
	gid, err := strconv.ParseInt(g, 10, 64)
	if err != nil || gid < 0 {
		return 0, nil, fmt.Errorf("kubernetes: container user %q: a pod runs as a numeric uid[:gid]", spec)
	}
	return uid, &gid, nil
}

// waitRunning waits for a pod's main container to run. A pod that cannot
// (an image not found, an init container that failed) fails at once; one
// Pending past the bound fails with the scheduler's reasons.
func (k *Kubernetes) waitRunning(ctx context.Context, name string) (*corev1.Pod, error) {
	bound := cmp.Or(k.opts.PendingTimeout, DefaultPendingTimeout)
	p, err := k.waitPod(ctx, name, bound, func(p *corev1.Pod) (bool, error) {
		switch p.Status.Phase {
		case corev1.PodRunning:
			return true, nil
		case corev1.PodSucceeded, corev1.PodFailed:
			return false, fmt.Errorf("kubernetes: pod %s ended before it was used (%s): %s", name, p.Status.Phase, k.why(ctx, p))
		}
		if why := stuck(p); why != "" {
			return false, fmt.Errorf("kubernetes: pod %s cannot start: %s", name, why)
		}
		return false, nil
	})
	if errors.Is(err, errPending) {
		return nil, fmt.Errorf("kubernetes: pod %s was still Pending after %s: %s", name, bound, k.why(ctx, p))
	}
	return p, err
}

// stuck says why a pending pod will not run without help: an image that
// cannot be had, a container that cannot be made, an init container that
// failed. "" is a pod that may yet run.
func stuck(p *corev1.Pod) string {
	for i, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range list {
			if w := c.State.Waiting; w != nil {
				switch w.Reason {
				case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
					return fmt.Sprintf("container %s: image %s: %s: %s", c.Name, c.Image, w.Reason, w.Message) + imageHint(c.Name)
				case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
					return fmt.Sprintf("container %s: %s: %s", c.Name, w.Reason, w.Message)
				}
			}
			if t := c.State.Terminated; i == 0 && t != nil && t.ExitCode != 0 {
				return fmt.Sprintf("init container %s exited %d (%s): %s", c.Name, t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
			}
		}
	}
	return ""
}

// imageHint says how to make troupe's binary image available when it is
// the one missing.
func imageHint(container string) string {
	if container != binContainer {
		return ""
	}
	return "; troupe's binary image is not on the node and cannot be pulled: troupe images binary --push --repo REPO (and --image-repo REPO), or load it into the nodes (see docs/runtime.md)"
}

// why is what the pod's events and conditions say of it: the scheduler's
// reasons for a pod it cannot place.
func (k *Kubernetes) why(ctx context.Context, p *corev1.Pod) string {
	if p == nil {
		return "the pod could not be read"
	}
	var reasons []string
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			reasons = append(reasons, fmt.Sprintf("%s: %s", c.Reason, c.Message))
		}
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	events, err := k.cs.CoreV1().Events(k.namespace).List(ectx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", p.Name).String(),
	})
	if err == nil {
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				reasons = append(reasons, fmt.Sprintf("%s: %s", e.Reason, e.Message))
			}
		}
	}
	if why := stuck(p); why != "" {
		reasons = append(reasons, why)
	}
	reasons = slices.Compact(reasons)
	if len(reasons) == 0 {
		return "no reason given by the cluster"
	}
	return strings.Join(reasons, "; ")
}

// terminationMessage is what a container of the list left as its
// termination message.
func terminationMessage(list []corev1.ContainerStatus, name string) string {
	for _, c := range list {
		if c.Name == name && c.State.Terminated != nil {
			return strings.TrimSpace(c.State.Terminated.Message)
		}
	}
	return ""
}

// ownPolicy makes the pod the owner of its NetworkPolicy, so that the
// cluster's garbage collector removes the policy with the pod even when
// troupe does not (a pod deleted by hand). A failure is logged: Remove and
// the reaper delete the policy by name and label anyway.
func (k *Kubernetes) ownPolicy(ctx context.Context, p *corev1.Pod) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID,
	}}}})
	_, err := k.cs.NetworkingV1().NetworkPolicies(k.namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		k.logger.Warn("kubernetes: make the pod own its network policy", "pod", p.Name, "error", err)
	}
}

// createPolicy makes the NetworkPolicy that denies the pod all traffic in
// and out (ownPolicy gives it to the pod once the pod exists).
func (k *Kubernetes) createPolicy(ctx context.Context, p *pod) error {
	m := p.meta
	m.Annotations = map[string]string{annotationLabels: p.meta.Annotations[annotationLabels]}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: m,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelPod: p.name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	_, err := k.cs.NetworkingV1().NetworkPolicies(k.namespace).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes: create the network policy of pod %s: %w", p.name, err)
	}
	return nil
}

// pullPolicy is IfNotPresent, so that images loaded into the nodes are
// used as they are, but Never for runtime.DefaultImageRepo's names, which
// no registry answers: a node without one says so at once instead of
// failing to resolve a registry.
func pullPolicy(ref string) corev1.PullPolicy {
	if strings.HasPrefix(ref, runtime.DefaultImageRepo+"/") {
		return corev1.PullNever
	}
	return corev1.PullIfNotPresent
}
