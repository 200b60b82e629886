// Package capfile writes the files of a trial that untrusted code can fill
// — an agent's output, a verifier's, the channel's transcript — with a
// bound: a file keeps its first bytes and its last bytes, and where the
// middle was dropped it says how much. An agent that writes 200 MB to its
// standard output leaves a file of the bound's size, not 200 MB.
//
// The tail is kept on disk, not in memory (two chunk files beside the file,
// used in turn), so a job of many trials stays small however much they
// write; Close puts the pieces together.
package capfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Limit bounds one file.
type Limit struct {
	// Head and Tail are the bytes kept from the start and from the end.
	// Zero Head and Tail is no bound.
	Head, Tail int64
	// Lines keeps whole lines (JSON lines): the head ends and the tail starts
	// at a line's end, and the marker is a JSON line of its own.
	Lines bool
}

// Unbounded reports whether the limit bounds nothing.
func (l Limit) Unbounded() bool { return l.Head <= 0 && l.Tail <= 0 }

func (l Limit) String() string {
	return fmt.Sprintf("its first %s and its last %s", size(l.Head), size(l.Tail))
}

func size(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Marker is the JSON line a Lines file holds where its middle was dropped.
type Marker struct {
	Truncated struct {
		DroppedBytes int64 `json:"dropped_bytes"`
		DroppedLines int64 `json:"dropped_lines"`
		HeadBytes    int64 `json:"head_bytes"`
		TailBytes    int64 `json:"tail_bytes"`
	} `json:"troupe_truncated"`
}

// TextMarkerPrefix starts the line a text file holds where its middle was
// dropped.
const TextMarkerPrefix = "[troupe: "

// File is a bounded file being written. Its methods are safe for
// concurrent use.
type File struct {
	lim  Limit
	path string

	mu       sync.Mutex
	f        *os.File
	head     int64 // bytes written to f
	lineEnd  int64 // the head's length up to its last line end
	last     byte  // the last byte written to f
	headFull bool
	chunks   [2]*os.File // the tail, in turn; nil until needed
	sizes    [2]int64
	lines    [2]int64 // newlines in each chunk
	cur      int
	dropped  int64
	dLines   int64
	// before is the byte just before the kept tail: a tail that follows a
	// line's end needs no cut.
	before byte
	closed bool
	err    error
}

// Create creates (or truncates) the file at path with a bound.
func Create(path string, lim Limit) (*File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &File{lim: lim, path: path, f: f}, nil
}

// Name is the file's path.
func (f *File) Name() string { return f.path }

// Write keeps what fits in the head, then what will be the tail. It never
// fails for lack of room: what does not fit is counted and dropped.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(p)
	if f.closed {
		return 0, os.ErrClosed
	}
	if f.err != nil {
		return 0, f.err
	}
	if f.lim.Unbounded() {
		return f.writeHead(p)
	}
	if !f.headFull {
		room := f.lim.Head - f.head
		if int64(len(p)) <= room {
			return f.writeHead(p)
		}
		cut := max(room, 0)
		if f.lim.Lines {
			cut = int64(bytes.LastIndexByte(p[:cut], '\n') + 1)
			if cut == 0 && f.head > f.lineEnd {
				// The head ends inside a line that p goes on with: the
				// line moves to the tail whole.
				partial := make([]byte, f.head-f.lineEnd)
				if _, err := f.f.ReadAt(partial, f.lineEnd); err != nil {
					f.err = err
					return 0, err
				}
				if err := f.f.Truncate(f.lineEnd); err != nil {
					f.err = err
					return 0, err
				}
				if _, err := f.f.Seek(f.lineEnd, io.SeekStart); err != nil {
					f.err = err
					return 0, err
				}
				f.head, f.last = f.lineEnd, '\n'
				p = append(partial, p...)
			}
		}
		if _, err := f.writeHead(p[:cut]); err != nil {
			return 0, err
		}
		f.headFull = true
		p = p[cut:]
	}
	if err := f.writeTail(p); err != nil {
		f.err = err
		return 0, err
	}
	return n, nil
}

func (f *File) writeHead(p []byte) (int, error) {
	k, err := f.f.Write(p)
	if i := bytes.LastIndexByte(p[:k], '\n'); i >= 0 {
		f.lineEnd = f.head + int64(i) + 1
	}
	f.head += int64(k)
	if k > 0 {
		f.last = p[k-1]
	}
	if err != nil {
		f.err = err
	}
	return k, err
}

// writeTail appends to the current chunk; a full chunk makes the older one,
// now entirely older than the last Tail bytes, dropped and reused.
func (f *File) writeTail(p []byte) error {
	if f.lim.Tail <= 0 {
		f.dropped += int64(len(p))
		f.dLines += int64(bytes.Count(p, []byte{'\n'}))
		if len(p) > 0 {
			f.before = p[len(p)-1]
		}
		return nil
	}
	for len(p) > 0 {
		if f.chunks[f.cur] == nil {
			c, err := os.Create(f.chunkName(f.cur))
			if err != nil {
				return err
			}
			f.chunks[f.cur] = c
		}
		room := f.lim.Tail - f.sizes[f.cur]
		if room <= 0 {
			if err := f.rotate(); err != nil {
				return err
			}
			continue
		}
		k := min(room, int64(len(p)))
		if _, err := f.chunks[f.cur].Write(p[:k]); err != nil {
			return err
		}
		f.sizes[f.cur] += k
		f.lines[f.cur] += int64(bytes.Count(p[:k], []byte{'\n'}))
		p = p[k:]
	}
	return nil
}

func (f *File) rotate() error {
	other := 1 - f.cur
	if c := f.chunks[other]; c != nil {
		if f.sizes[other] > 0 {
			var b [1]byte
			if _, err := c.ReadAt(b[:], f.sizes[other]-1); err != nil {
				return err
			}
			f.before = b[0]
		}
		f.dropped += f.sizes[other]
		f.dLines += f.lines[other]
		if err := c.Truncate(0); err != nil {
			return err
		}
		if _, err := c.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	f.sizes[other], f.lines[other] = 0, 0
	f.cur = other
	return nil
}

func (f *File) chunkName(i int) string {
	return filepath.Join(filepath.Dir(f.path), fmt.Sprintf(".%s.tail%d", filepath.Base(f.path), i))
}

// Sync commits the head to stable storage.
func (f *File) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	return f.f.Sync()
}

// Dropped is how many bytes were dropped; final after Close.
func (f *File) Dropped() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// Close writes the marker and the tail after the head, removes the chunk
// files and closes the file. Closing twice does nothing.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	err := f.assemble()
	for i, c := range f.chunks {
		if c != nil {
			err = errors.Join(err, c.Close(), os.Remove(f.chunkName(i)))
		}
	}
	return errors.Join(err, f.f.Close())
}

// assemble appends the marker and the last Tail bytes of the chunks (the
// older one first); with Lines, the tail starts after its first line end.
func (f *File) assemble() error {
	if !f.headFull || f.err != nil {
		return f.err
	}
	older, newer := 1-f.cur, f.cur
	var parts []io.Reader
	keep := f.lim.Tail
	if c := f.chunks[newer]; c != nil {
		keep -= f.sizes[newer]
	}
	if c := f.chunks[older]; c != nil && f.sizes[older] > 0 {
		skip := f.sizes[older] - max(keep, 0)
		if skip > 0 {
			n, err := countLines(io.NewSectionReader(c, 0, skip))
			if err != nil {
				return err
			}
			var b [1]byte
			if _, err := c.ReadAt(b[:], skip-1); err != nil {
				return err
			}
			f.dropped += skip
			f.dLines += n
			f.before = b[0]
		}
		parts = append(parts, io.NewSectionReader(c, max(skip, 0), f.sizes[older]-max(skip, 0)))
	}
	if c := f.chunks[newer]; c != nil {
		parts = append(parts, io.NewSectionReader(c, 0, f.sizes[newer]))
	}
	tail := bufio.NewReader(io.MultiReader(parts...))
	if f.lim.Lines && f.dropped > 0 && f.before != '\n' {
		// The tail's first line is cut unless the cut fell at a line's end.
		first, err := tail.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			f.dropped += int64(len(first))
			first, err = tail.ReadSlice('\n')
		}
		f.dropped += int64(len(first))
		if err == nil {
			f.dLines++
		}
	}
	if f.dropped > 0 {
		if _, err := f.f.Write(f.marker()); err != nil {
			return err
		}
	}
	_, err := io.Copy(f.f, tail)
	return err
}

func (f *File) marker() []byte {
	if f.lim.Lines {
		var m Marker
		m.Truncated.DroppedBytes, m.Truncated.DroppedLines = f.dropped, f.dLines
		m.Truncated.HeadBytes, m.Truncated.TailBytes = f.lim.Head, f.lim.Tail
		line, _ := json.Marshal(m)
		return append(line, '\n')
	}
	lead := ""
	if f.head > 0 && f.last != '\n' {
		lead = "\n"
	}
	return fmt.Appendf(nil, "%s%s%d bytes (%d lines) dropped here; this file keeps %s]\n", lead, TextMarkerPrefix, f.dropped, f.dLines, f.lim)
}

func countLines(r io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
