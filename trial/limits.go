package trial

import (
	"context"
	"fmt"
	"time"
)

// storageLimiter is a runtime that can say whether a container's storage
// limit (ContainerSpec.StorageMB) holds on its engine (runtime/docker): a
// runtime that cannot say is taken not to enforce it.
type storageLimiter interface {
	StorageLimit(ctx context.Context, image string) error
}

// limits are the trial container's CPUs, memory and processes: the task's,
// unless the manifest overrides them. Each compose service gets them too,
// or its own where tighter.
func (r *run) limits() (cpus float64, memoryMB, pids int64) {
	t, env := r.spec.Task, r.spec.Team.Manifest.Environment
	cpus, memoryMB, pids = t.CPUs, t.MemoryMB, defaultPids
	if v := env.OverrideCPUs; v != nil {
		cpus = float64(*v)
	}
	if v := env.OverrideMemoryMB; v != nil {
		memoryMB = *v
	}
	if v := env.OverridePids; v != nil {
		pids = *v
	}
	return cpus, memoryMB, pids
}

// storageLimit is the storage limit the trial container is created with:
// the task's storage_mb (or the manifest's override) where the runtime
// enforces it on image. Where it cannot, the limit is not silently
// dropped: the trial warns (an EventWarning, before the agents start) and
// names it in result.json's limits_not_enforced, and runs without it.
func (r *run) storageLimit(ctx context.Context, image string) int64 {
	mb := r.spec.Task.StorageMB
	if v := r.spec.Team.Manifest.Environment.OverrideStorageMB; v != nil {
		mb = *v
	}
	if mb <= 0 {
		return 0
	}
	why := fmt.Sprintf("the %s runtime cannot limit a container's storage", r.env.Runtime.Name())
	if sl, ok := r.env.Runtime.(storageLimiter); ok {
		err := sl.StorageLimit(ctx, image)
		if err == nil {
			return mb
		}
		why = err.Error()
	}
	msg := fmt.Sprintf("storage_mb = %d is not enforced: %s; the agents may write more than that", mb, why)
	r.res.LimitsNotEnforced = append(r.res.LimitsNotEnforced, "storage_mb")
	r.res.LimitsNote = msg
	r.log.Warn("limit not enforced", "limit", "storage_mb", "why", why)
	r.emit(Event{Time: time.Now(), Type: EventWarning, Trial: r.spec.Name, Message: msg})
	return 0
}
