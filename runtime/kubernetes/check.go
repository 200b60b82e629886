package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/troupebench/troupe/runtime"
)

// Check is troupe doctor's view of the cluster: the apiserver's version,
// the namespace, and a pod started from image with troupe's binary image
// in it, offline, running troupe version through an exec.
func (k *Kubernetes) Check(ctx context.Context, image string) []runtime.Check {
	var out []runtime.Check
	add := func(name string, err error, fix, detail string) {
		out = append(out, runtime.Check{Name: name, Err: err, Fix: fix, Detail: detail})
	}
	v, err := k.cs.Discovery().ServerVersion()
	detail := ""
	if err == nil {
		detail = fmt.Sprintf("Kubernetes %s at %s, namespace %s", v.GitVersion, k.cfg.Host, k.namespace)
	}
	add("cluster", err, "check the kubeconfig's context (--kube-context) and that the cluster runs", detail)
	if err != nil {
		return out
	}
	start := time.Now()
	err = k.tryPod(ctx, image)
	add("pod", err, "read the error: the image "+image+" and troupe's binary image "+k.binImage+" must be on the nodes or in a registry they pull from (troupe images binary --push; docs/runtime.md)",
		fmt.Sprintf("a pod from %s with troupe's binary (%s), offline, ran an exec in %s", image, k.binImage, time.Since(start).Round(time.Millisecond)))
	return out
}

// tryPod starts an offline pod, runs troupe version in it as a user that
// is not root, and removes it.
func (k *Kubernetes) tryPod(ctx context.Context, image string) error {
	c, err := k.Create(ctx, runtime.ContainerSpec{
		Image: image, Entrypoint: []string{runtime.BinaryPath, "init"}, User: "0:0",
		Labels: map[string]string{runtime.LabelTrial: "doctor"},
	})
	if err != nil {
		return err
	}
	defer c.Remove(context.WithoutCancel(ctx))
	if err := c.Start(ctx); err != nil {
		return err
	}
	var outBuf bytes.Buffer
	p, err := c.Exec(ctx, runtime.ExecSpec{Cmd: []string{runtime.BinaryPath, "version"}, User: "65534", Stdout: &outBuf, Stderr: &outBuf})
	if err != nil {
		return err
	}
	defer p.Close()
	code, err := p.Wait(ctx)
	if err != nil || code != 0 {
		return fmt.Errorf("troupe version in the pod: exit %d, %v: %s", code, err, strings.TrimSpace(outBuf.String()))
	}
	return nil
}
