package dataset

import (
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Limits bound what fetching a dataset writes into the cache: a task is
// bounded in size before it is used, and a repository in what one clone or
// fetch receives, checked while it arrives. Zero fields take
// DefaultLimits'.
type Limits struct {
	// FileBytes bounds one file of a task; TaskBytes a task's files
	// together; Entries a task's files, folders and links.
	FileBytes, TaskBytes int64
	Entries              int
	// CloneBytes bounds what one clone or fetch of a repository receives
	// (git's packed, compressed objects).
	CloneBytes int64
}

// DefaultLimits are generous for Harbor's tasks (a Dockerfile, tests and a
// few fixtures) and stop a blob or a repository that would fill the disk.
var DefaultLimits = Limits{FileBytes: 100 << 20, TaskBytes: 512 << 20, Entries: 20_000, CloneBytes: 4 << 30}

// The flags of troupe run that raise each limit, for messages.
const (
	FlagFileMB  = "--dataset-max-file-mb"
	FlagTaskMB  = "--dataset-max-task-mb"
	FlagEntries = "--dataset-max-entries"
	FlagCloneMB = "--dataset-max-clone-mb"
)

// ErrTooBig is the condition of a *LimitError.
var ErrTooBig = errors.New("over a limit of fetched datasets")

// LimitError is a fetch stopped at one of its Limits.
type LimitError struct {
	// Limit says which: "file", "task", "entries" or "clone".
	Limit string
	// Name is the file (a path in the task), the task's path or the
	// repository's URL.
	Name string
	// Size is what it reached (bytes, or entries), at least Max+1.
	Size, Max int64
	// Flag raises the limit.
	Flag string
}

func (e *LimitError) Error() string {
	switch e.Limit {
	case "entries":
		return fmt.Sprintf("%s holds more than %d files, folders and links, the limit of a fetched task (%s raises it)", e.Name, e.Max, e.Flag)
	case "clone":
		return fmt.Sprintf("the repository %s sent more than %s, the limit of one clone or fetch (%s raises it)", e.Name, mib(e.Max), e.Flag)
	case "task":
		return fmt.Sprintf("the task %s is more than %s, the limit of a fetched task (%s raises it)", e.Name, mib(e.Max), e.Flag)
	}
	return fmt.Sprintf("%s is %d bytes, over %s, the limit of a file of a fetched task (%s raises it)", e.Name, e.Size, mib(e.Max), e.Flag)
}

func (e *LimitError) Unwrap() error { return ErrTooBig }

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// orDefault fills the zero fields.
func (l Limits) orDefault() Limits {
	d := DefaultLimits
	if l.FileBytes > 0 {
		d.FileBytes = l.FileBytes
	}
	if l.TaskBytes > 0 {
		d.TaskBytes = l.TaskBytes
	}
	if l.Entries > 0 {
		d.Entries = l.Entries
	}
	if l.CloneBytes > 0 {
		d.CloneBytes = l.CloneBytes
	}
	return d
}

// budget is what one task's extraction has left.
type budget struct {
	Limits
	task           string
	bytes, entries int64
}

// entry counts one more file, folder or link of the task.
func (b *budget) entry() error {
	if b.entries++; b.entries > int64(b.Entries) {
		return &LimitError{Limit: "entries", Name: b.task, Size: b.entries, Max: int64(b.Entries), Flag: FlagEntries}
	}
	return nil
}

// check says whether a file of that size fits what is left.
func (b *budget) check(name string, size int64) error {
	if size > b.FileBytes {
		return &LimitError{Limit: "file", Name: name, Size: size, Max: b.FileBytes, Flag: FlagFileMB}
	}
	if b.bytes+size > b.TaskBytes {
		return &LimitError{Limit: "task", Name: b.task, Size: b.bytes + size, Max: b.TaskBytes, Flag: FlagTaskMB}
	}
	return nil
}

// file takes a file's size from the budget before it is written.
func (b *budget) file(name string, size int64) error {
	if err := b.check(name, size); err != nil {
		return err
	}
	b.bytes += size
	return nil
}

// boundedStorage is a repository's storage that stops a clone or fetch
// whose objects exceed a limit as they arrive: go-git writes what a
// server sends through PackfileWriter.
type boundedStorage struct {
	*filesystem.Storage
	url   string
	limit int64
}

var _ storer.PackfileWriter = (*boundedStorage)(nil)

func (s *boundedStorage) PackfileWriter() (io.WriteCloser, error) {
	w, err := s.Storage.PackfileWriter()
	if err != nil {
		return nil, err
	}
	return &boundedWriter{WriteCloser: w, s: s}, nil
}

type boundedWriter struct {
	io.WriteCloser
	s    *boundedStorage
	seen int64
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.seen+int64(len(p)) > w.s.limit {
		return 0, &LimitError{Limit: "clone", Name: w.s.url, Size: w.seen + int64(len(p)), Max: w.s.limit, Flag: FlagCloneMB}
	}
	w.seen += int64(len(p))
	return w.WriteCloser.Write(p)
}
