package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/troupebench/troupe/runtime"
)

// SetOnline puts a pod made with NetworkBridge online or offline. Before
// Start it says how the pod starts; after, an ephemeral container of
// troupe's binary image, with NET_ADMIN in the pod's network namespace,
// takes its interfaces down (keeping the routes they had) or brings them
// back with those routes, and the pod's NetworkPolicy is made or deleted
// to match. Either is a no-op when the pod already is so.
func (p *pod) SetOnline(ctx context.Context, online bool) error {
	if err := p.gone(); err != nil {
		return err
	}
	k, id := p.k, p.name
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spec.Network != runtime.NetworkBridge {
		return fmt.Errorf("kubernetes: pod %s was created without a network of its own (runtime.NetworkBridge): it cannot be put online", id)
	}
	if p.online == online {
		return nil
	}
	if !p.made.Load() {
		p.online = online
		return nil
	}
	if !online {
		if err := k.createPolicy(ctx, p); err != nil {
			return err
		}
		routes, err := k.linkCommand(ctx, p, []string{"link", "down"})
		if err != nil {
			return err
		}
		p.routes, p.online = routes, false
		return nil
	}
	if _, err := k.linkCommand(ctx, p, []string{"link", "up", "--routes", p.routes}); err != nil {
		return err
	}
	p.online = true
	return k.deletePolicy(ctx, id)
}

// linkCommand runs troupe link in an ephemeral container of the pod and
// returns its termination message (the routes it took away or restored).
func (k *Kubernetes) linkCommand(ctx context.Context, p *pod, args []string) (string, error) {
	p.netSeq++
	name := fmt.Sprintf("troupe-net-%d", p.netSeq)
	h := k.helper(name, append([]string{runtime.BinaryImagePath}, args...), true)
	pods := k.cs.CoreV1().Pods(k.namespace)
	// The whole pod is sent back: a status the kubelet wrote meanwhile is
	// a conflict, and the update is made again on the new version.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.EphemeralContainers = append(cur.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: h.Name, Image: h.Image, ImagePullPolicy: h.ImagePullPolicy, Command: h.Command,
				SecurityContext: h.SecurityContext, TerminationMessagePolicy: h.TerminationMessagePolicy,
			},
		})
		_, err = pods.UpdateEphemeralContainers(ctx, p.name, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("kubernetes: add the network helper to pod %s: %w", p.name, err)
	}
	// Once added it runs whatever the caller does: its end is waited for,
	// so that the routes it reports are kept for the next switch.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(k.opts.PendingTimeout, DefaultPendingTimeout))
	defer cancel()
	var msg string
	_, err = k.waitPod(ctx, p.name, cmp.Or(k.opts.PendingTimeout, DefaultPendingTimeout), func(got *corev1.Pod) (bool, error) {
		for _, c := range got.Status.EphemeralContainerStatuses {
			if c.Name != name {
				continue
			}
			if t := c.State.Terminated; t != nil {
				if t.ExitCode != 0 {
					return false, fmt.Errorf("kubernetes: troupe %v in pod %s exited %d: %s", args[:2], p.name, t.ExitCode, t.Message)
				}
				msg = t.Message
				return true, nil
			}
			if w := c.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
				return false, fmt.Errorf("kubernetes: troupe %v in pod %s: %s: %s%s", args[:2], p.name, w.Reason, w.Message, imageHint(binContainer))
			}
		}
		return false, nil
	})
	if errors.Is(err, errPending) {
		return "", fmt.Errorf("kubernetes: troupe %v in pod %s did not end within %s", args[:2], p.name, cmp.Or(k.opts.PendingTimeout, DefaultPendingTimeout))
	}
	return msg, err
}
