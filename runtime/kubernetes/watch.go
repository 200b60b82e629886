package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// errPending is a wait that ran out of its bound; the last state seen
// explains it.
var errPending = errors.New("still waiting")

// waitPod follows a pod through a watch until done says it is done (or
// fails) or the bound passes: a pod's changes arrive as they happen, where
// polling would add up to its interval to every start. A watch the
// apiserver ends is opened again from the last version seen.
func (k *Kubernetes) waitPod(ctx context.Context, name string, bound time.Duration, done func(*corev1.Pod) (bool, error)) (*corev1.Pod, error) {
	pods := k.cs.CoreV1().Pods(k.namespace)
	ctx, cancel := context.WithTimeoutCause(ctx, bound, errPending)
	defer cancel()
	var last *corev1.Pod
	for {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return last, waitErr(ctx, name, err)
		}
		last = p
		if ok, err := done(p); ok || err != nil {
			return p, err
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: p.ResourceVersion,
		})
		if err != nil {
			return last, waitErr(ctx, name, err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return last, fmt.Errorf("kubernetes: pod %s was deleted", name)
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			last = p
			if ok, err := done(p); ok || err != nil {
				w.Stop()
				return p, err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return last, waitErr(ctx, name, ctx.Err())
		}
	}
}

// waitErr says why a wait ended early: its bound (errPending), the
// caller's cancellation, or the apiserver.
func waitErr(ctx context.Context, name string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return fmt.Errorf("kubernetes: pod %s: %w", name, err)
}
