package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// lockCache takes the cache for this process: two Fetches writing one cache
// would replace each other's folders. The lock is the kernel's (flock), so
// a troupe that died holds it no longer.
func lockCache(ctx context.Context, dir string, log io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dataset cache: %w", err)
	}
	fd := int(f.Fd())
	err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return func() { f.Close() }, nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, fmt.Errorf("lock the dataset cache %s: %w", dir, err)
	}
	fmt.Fprintf(log, "waiting for another troupe that is fetching into %s\n", dir)
	// flock cannot be cancelled: it waits in a goroutine that ends when it
	// has the lock, and releases it at once if the caller gave up by then.
	got := make(chan error)
	gaveUp := make(chan struct{})
	go func() {
		err := syscall.Flock(fd, syscall.LOCK_EX)
		select {
		case got <- err:
		case <-gaveUp:
			f.Close()
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock the dataset cache %s: %w", dir, err)
		}
		return func() { f.Close() }, nil
	case <-ctx.Done():
		close(gaveUp)
		return nil, ctx.Err()
	}
}
