// Package kubetest is what the Kubernetes backend's tests share: the switch
// that runs them against a real cluster (TROUPE_K8S_E2E=1, which .ci/kube-up
// prints), and loading a local Docker image into that cluster's nodes.
package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Skip is why the cluster tests did not run, or "" when they can.
func Skip() string {
	if os.Getenv("TROUPE_K8S_E2E") == "1" {
		return ""
	}
	return "the Kubernetes tests need a cluster: run them with " +
		`kube_env=$(bash .ci/kube-up) && eval "$kube_env" && bash .ci/kube-up --import busybox:latest` +
		" (a real single-node cluster on this machine, docs/kube-test-cluster.md), or set TROUPE_K8S_E2E=1 with KUBECONFIG pointing at a cluster that has busybox:latest and troupe's images"
}

// LoadImage copies a local Docker image into the test cluster's containerd
// (TROUPE_K8S_CONTAINERD, which .ci/kube-up prints), where pods find it by
// its full name without pulling. Without that socket the image must already
// be on the cluster's nodes: nothing is done.
func LoadImage(ctx context.Context, ref string) error {
	sock := os.Getenv("TROUPE_K8S_CONTAINERD")
	if sock == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	save := exec.CommandContext(ctx, "docker", "save", ref)
	imp := exec.CommandContext(ctx, "ctr", "--address", sock, "--namespace", "k8s.io", "images", "import", "-")
	var saveErr, impOut bytes.Buffer
	save.Stderr = &saveErr
	imp.Stdout, imp.Stderr = &impOut, &impOut
	pipe, err := save.StdoutPipe()
	if err != nil {
		return err
	}
	imp.Stdin = pipe
	if err := save.Start(); err != nil {
		return fmt.Errorf("docker save %s: %w", ref, err)
	}
	if err := imp.Run(); err != nil {
		save.Wait()
		return fmt.Errorf("import %s into the cluster's containerd: %w: %s", ref, err, strings.TrimSpace(impOut.String()))
	}
	if err := save.Wait(); err != nil {
		return fmt.Errorf("docker save %s: %w: %s", ref, err, strings.TrimSpace(saveErr.String()))
	}
	return nil
}
