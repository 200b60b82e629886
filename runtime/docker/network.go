package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/troupebench/troupe/runtime"
)

// labelJobNetwork, on a container, names the job's internet network it
// was given: shared, so removing the container leaves it.
const labelJobNetwork = "troupe.job-network"

// jobNetworks are the internet networks of this process's jobs: one bridge
// network per job, made on a trial's first need, in which containers
// cannot reach each other (inter-container traffic off), so trials stay
// apart as on networks of their own, without making and removing one per
// trial (about 0.4 s of a trial's time).
type jobNetworks struct {
	mu   sync.Mutex
	nets map[string]jobNetwork // by job label
}

type jobNetwork struct{ id, name string }

// jobNetwork returns the job's internet network, making it on first use.
func (d *Docker) jobNetwork(ctx context.Context, job string) (jobNetwork, error) {
	d.jobNets.mu.Lock()
	defer d.jobNets.mu.Unlock()
	if n, ok := d.jobNets.nets[job]; ok {
		return n, nil
	}
	name := "troupe-net-" + strings.TrimPrefix(nameFor(map[string]string{runtime.LabelTrial: job}), "troupe-")
	labels := d.labels(map[string]string{runtime.LabelJob: job})
	// Each trial reaches the internet, not another trial.
	resp, err := d.cli.NetworkCreate(ctx, name, trialBridge(labels, false, map[string]string{"com.docker.network.bridge.enable_icc": "false"}))
	if err != nil {
		return jobNetwork{}, fmt.Errorf("docker: create the job's network: %w", err)
	}
	n := jobNetwork{id: resp.ID, name: name}
	if d.jobNets.nets == nil {
		d.jobNets.nets = map[string]jobNetwork{}
	}
	d.jobNets.nets[job] = n
	return n, nil
}

// forget drops a job's network that has gone (removed by troupe clean, or
// by a second Ctrl+C), so that the next trial makes a new one.
func (d *Docker) forget(job, id string) {
	d.jobNets.mu.Lock()
	defer d.jobNets.mu.Unlock()
	if d.jobNets.nets[job].id == id {
		delete(d.jobNets.nets, job)
	}
}

// EndJob removes the job's internet network, once its trials are done. A
// network still in use (a container left behind) is an error; the reaper
// or troupe clean removes it later.
func (d *Docker) EndJob(ctx context.Context, job string) error {
	d.jobNets.mu.Lock()
	n, ok := d.jobNets.nets[job]
	delete(d.jobNets.nets, job)
	d.jobNets.mu.Unlock()
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
	defer cancel()
	if err := d.cli.NetworkRemove(ctx, n.id); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: remove job %s's network: %w", job, err)
	}
	return nil
}

// endJobs removes every job network this process still has.
func (d *Docker) endJobs(ctx context.Context) error {
	d.jobNets.mu.Lock()
	jobs := slices.Collect(maps.Keys(d.jobNets.nets))
	d.jobNets.mu.Unlock()
	var errs []error
	for _, job := range jobs {
		errs = append(errs, d.EndJob(ctx, job))
	}
	return errors.Join(errs...)
}
