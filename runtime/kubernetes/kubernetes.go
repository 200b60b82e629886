// Package kubernetes runs trial containers as pods on a Kubernetes cluster
// through client-go: a pod per trial, in one namespace, from the task's
// image. Kubernetes is the backend and a pod's handle is a
// runtime.Container, as on Docker, so a job spreads over a cluster with
// the relay and the gateway staying in troupe's process: every pod is
// reached through exec streams (the tunnel, each agent), as on Docker.
//
// What Docker gives per exec or per container, a pod does not, so troupe's
// own binary, copied into each pod by an init container from its image
// (runtime.BinaryImageRef), does it inside:
//   - troupe exec-as runs each exec as the user, in the folder and with the
//     environment asked for (a Kubernetes exec has none of these);
//   - troupe link down, in an init container with NET_ADMIN, takes a pod
//     without network offline in its own network namespace, where the
//     trial's container (without NET_ADMIN) cannot undo it; an ephemeral
//     container puts it online and offline again. A NetworkPolicy denying
//     all traffic is also made for each offline pod: it holds where the
//     cluster's network plugin enforces policies.
//
// A pod cannot be created stopped: Create keeps the spec, the handle's
// Start makes the pod, waits for it to run (a pod Pending past a bound fails with the
// scheduler's reasons) and copies in what CopyIn was given before.
package kubernetes

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/troupebench/troupe/runtime"
)

// KindPolicy is the kind of a trial pod's NetworkPolicy.
const KindPolicy = "networkpolicy"

// RemoveTimeout bounds one removal, the wait for the pod to be gone
// included.
const RemoveTimeout = 60 * time.Second

// DefaultPendingTimeout is how long a pod may stay Pending (unscheduled,
// or its images being pulled) before its trial fails as an infrastructure
// failure, with the scheduler's reasons.
const DefaultPendingTimeout = 3 * time.Minute

// annotationLabels holds a resource's troupe labels exactly: label values
// are limited to 63 characters of [A-Za-z0-9_.-], so a value that is not
// one (an owner, host:boot:pid:start) is labelled by its digest, and read
// back from here.
const annotationLabels = "troupe.labels"

// labelPod selects a trial pod by its name, for its NetworkPolicy.
const labelPod = "troupe.pod"

// Options say which cluster, namespace and images a backend uses.
type Options struct {
	// Kubeconfig is a kubeconfig file; "" is the usual places (KUBECONFIG,
	// ~/.kube/config), then the in-cluster configuration.
	Kubeconfig string
	// Context is the kubeconfig's context; "" is its current one.
	Context string
	// Namespace is where pods go; "" is the context's namespace, else
	// "default".
	Namespace string
	// ImageRepo is where built task environments and troupe's binary image
	// are (EnvironmentRef, runtime.BinaryImageRef); "" is
	// runtime.DefaultImageRepo, images loaded into the nodes.
	ImageRepo string
	// Binary is troupe's static binary, which every pod gets (from its
	// image) at runtime.BinaryPath.
	Binary *runtime.Binary
	// PendingTimeout bounds a pod's time Pending; 0 is
	// DefaultPendingTimeout.
	PendingTimeout time.Duration
}

// Kubernetes is the Kubernetes backend. Create it with New, connect it
// with Open; Close ends what it runs in the background.
type Kubernetes struct {
	opts    Options
	version string
	logger  *slog.Logger

	cfg       *rest.Config
	cs        kubernetes.Interface
	namespace string
	owner     runtime.Owner
	binImage  string

	mu     sync.Mutex
	pods   map[string]*pod // by name: what this process created or will
	images imageCache

	// life is the image probes' context, from Open until Close, which
	// then waits for them.
	life   context.Context
	end    context.CancelFunc
	probes sync.WaitGroup
}

var _ runtime.Cleaner = (*Kubernetes)(nil)

// New makes a backend, with no I/O; Open connects it. version is troupe's,
// for the troupe.version label.
func New(opts Options, version string, logger *slog.Logger) *Kubernetes {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Kubernetes{opts: opts, version: version, logger: logger, pods: map[string]*pod{}, images: imageCache{m: map[string]*imageProbe{}}}
}

// Name is "kubernetes".
func (k *Kubernetes) Name() string { return "kubernetes" }

// Open reads the kubeconfig and checks that the apiserver answers and the
// namespace exists. The image probes it starts later live until Close,
// whatever becomes of ctx.
func (k *Kubernetes) Open(ctx context.Context) error {
	if k.opts.Binary == nil {
		return errors.New("kubernetes: no troupe binary for the pods (Options.Binary)")
	}
	owner, err := runtime.Self()
	if err != nil {
		return fmt.Errorf("kubernetes: who owns what troupe creates: %w", err)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.opts.Kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.opts.Context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubernetes: read the kubeconfig (KUBECONFIG, ~/.kube/config or --kubeconfig; --kube-context to pick a context): %w", err)
	}
	ns := k.opts.Namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil {
			return fmt.Errorf("kubernetes: the kubeconfig's namespace: %w", err)
		}
	}
	cfg.QPS, cfg.Burst = 50, 100 // a job's trials poll and exec in parallel
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/version").Do(cctx).Raw(); err != nil {
		return fmt.Errorf("kubernetes: the apiserver at %s does not answer (%v); check the kubeconfig's context (--kube-context) and that the cluster runs", cfg.Host, err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(cctx, ns, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("kubernetes: namespace %q does not exist: create it (kubectl create namespace %s) or pick another with --namespace", ns, ns)
		}
		if !apierrors.IsForbidden(err) { // may not read namespaces, may still use one
			return fmt.Errorf("kubernetes: namespace %q: %w", ns, err)
		}
	}
	k.cfg, k.cs, k.namespace, k.owner = cfg, cs, ns, owner
	k.binImage = runtime.BinaryImageRef(k.opts.ImageRepo, k.opts.Binary)
	k.life, k.end = context.WithCancel(context.WithoutCancel(ctx))
	return nil
}

// Close stops the image probes under way and waits for them (each removes
// its pod); pods and policies are the trials' to remove. A backend never
// opened has nothing to stop.
func (k *Kubernetes) Close(ctx context.Context) error {
	if k.end != nil {
		k.end()
	}
	k.probes.Wait()
	return nil
}

// Owner is the owner this backend labels resources with.
func (k *Kubernetes) Owner() runtime.Owner { return k.owner }

// Isolation: an offline pod's interfaces are down in its network
// namespace, which its container cannot undo; its NetworkPolicy holds only
// where the network plugin enforces policies.
func (k *Kubernetes) Isolation() runtime.Isolation {
	return runtime.Isolation{Runtime: k.Name(),
		Enforced:  "network interfaces down in the pod's network namespace (an init or ephemeral container with NET_ADMIN; the trial's container has none)",
		Requested: "a NetworkPolicy denying all ingress and egress: enforced only where the cluster's network plugin implements NetworkPolicy",
	}
}

// Namespace is the namespace the backend's pods are in.
func (k *Kubernetes) Namespace() string { return k.namespace }

// labels returns troupe's labels for a new resource.
func (k *Kubernetes) labels(extra map[string]string) map[string]string {
	out := map[string]string{runtime.LabelOwner: k.owner.String(), runtime.LabelVersion: k.version}
	for key, v := range extra {
		out[key] = v
	}
	return out
}

// meta is the metadata of a new resource: troupe's labels, as label values
// where they can be, exactly in an annotation.
func meta(name string, labels map[string]string) (metav1.ObjectMeta, error) {
	exact, err := json.Marshal(labels)
	if err != nil {
		return metav1.ObjectMeta{}, err
	}
	sel := map[string]string{}
	for key, v := range labels {
		if !validLabelKey(key) {
			return metav1.ObjectMeta{}, fmt.Errorf("kubernetes: label key %q is not one Kubernetes accepts", key)
		}
		sel[key] = labelValue(v)
	}
	return metav1.ObjectMeta{Name: name, Labels: sel, Annotations: map[string]string{annotationLabels: string(exact)}}, nil
}

var (
	labelValueRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	labelKeyRE   = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
)

// labelValue is v as a label value: itself when Kubernetes accepts it,
// else "h." and the start of its digest, which List's selectors use too.
func labelValue(v string) string {
	if len(v) <= 63 && labelValueRE.MatchString(v) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h." + hex.EncodeToString(sum[:20])
}

func validLabelKey(key string) bool {
	name := key[strings.LastIndexByte(key, '/')+1:]
	return len(name) <= 63 && labelKeyRE.MatchString(key)
}

// exactLabels reads a resource's troupe labels back.
func exactLabels(m metav1.ObjectMeta) map[string]string {
	var out map[string]string
	if err := json.Unmarshal([]byte(m.Annotations[annotationLabels]), &out); err != nil || out == nil {
		return m.Labels
	}
	return out
}

// selector is a label selector for labels as List takes them: an empty
// value matches any value of that key.
func selector(labels map[string]string) string {
	var parts []string
	for key, v := range labels {
		if v == "" {
			parts = append(parts, key)
		} else {
			parts = append(parts, key+"="+labelValue(v))
		}
	}
	if _, ok := labels[runtime.LabelOwner]; !ok {
		parts = append(parts, runtime.LabelOwner)
	}
	return strings.Join(parts, ",")
}

var nameRE = regexp.MustCompile(`[^a-z0-9-]+`)

// podName names a trial's pod after its trial (or what the labels say)
// with a random suffix: a DNS label, as a pod's hostname must be.
func podName(labels map[string]string) string {
	base := cmp.Or(labels[runtime.LabelTrial], labels[runtime.LabelJob], "container")
	base = strings.Trim(nameRE.ReplaceAllString(strings.ToLower(base), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	b := make([]byte, 4)
	rand.Read(b)
	return "troupe-" + cmp.Or(base, "c") + "-" + hex.EncodeToString(b)
}

// List lists troupe's pods and NetworkPolicies whose labels match.
func (k *Kubernetes) List(ctx context.Context, labels map[string]string) ([]runtime.Resource, error) {
	sel := metav1.ListOptions{LabelSelector: selector(labels)}
	pods, err := k.cs.CoreV1().Pods(k.namespace).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list pods in %s: %w", k.namespace, err)
	}
	var out []runtime.Resource
	for _, p := range pods.Items {
		out = append(out, toResource(runtime.KindContainer, p.ObjectMeta))
	}
	policies, err := k.cs.NetworkingV1().NetworkPolicies(k.namespace).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list network policies in %s: %w", k.namespace, err)
	}
	for _, p := range policies.Items {
		out = append(out, toResource(KindPolicy, p.ObjectMeta))
	}
	return out, nil
}

func toResource(kind string, m metav1.ObjectMeta) runtime.Resource {
	return runtime.Resource{Kind: kind, ID: m.Name, Name: m.Name, Labels: exactLabels(m), Created: m.CreationTimestamp.Time}
}

// Remove deletes a pod (with its NetworkPolicy) and waits until it is
// gone, or deletes a policy. It is bounded by RemoveTimeout and runs even
// if ctx was cancelled; a resource already gone is not an error.
func (k *Kubernetes) Remove(ctx context.Context, r runtime.Resource) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
	defer cancel()
	switch r.Kind {
	case runtime.KindContainer:
		k.mu.Lock()
		p := k.pods[r.ID]
		delete(k.pods, r.ID)
		k.mu.Unlock()
		if p != nil && !p.markRemoved() {
			return nil // never made: Start was not called, or failed before the pod
		}
		// The pod first: its policy keeps it cut off until it is gone.
		if err := k.deletePod(ctx, r.ID); err != nil {
			return err
		}
		return k.deletePolicy(ctx, r.ID)
	case KindPolicy:
		return k.deletePolicy(ctx, r.ID)
	}
	return fmt.Errorf("kubernetes: cannot remove a %s", r.Kind)
}

func (k *Kubernetes) deletePolicy(ctx context.Context, name string) error {
	err := k.cs.NetworkingV1().NetworkPolicies(k.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: delete network policy %s: %w", name, err)
	}
	return nil
}

// deletePod deletes a pod, with a grace period of a second (troupe init
// ends on TERM at once; its agents were swept and its files copied out),
// and waits until the kubelet has stopped it and the pod is gone, so that
// nothing of it runs or holds the node's resources once Remove returns.
func (k *Kubernetes) deletePod(ctx context.Context, name string) error {
	pods := k.cs.CoreV1().Pods(k.namespace)
	err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(1))})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes: delete pod %s: %w", name, err)
	}
	for {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("the kubelet has not stopped it")
			}
			return fmt.Errorf("kubernetes: pod %s was deleted but is still there when the wait ended (%w): %w", name, context.Cause(ctx), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
