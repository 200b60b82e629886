package capfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// write writes data in pieces of the given sizes (cycled) and returns what
// the file holds after Close.
func write(t testing.TB, lim Limit, data []byte, pieces ...int) ([]byte, *File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.log")
	f, err := Create(path, lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) == 0 {
		pieces = []int{len(data) + 1}
	}
	for i, k := 0, 0; i < len(data); k++ {
		n := min(max(pieces[k%len(pieces)], 1), len(data)-i)
		if m, err := f.Write(data[i : i+n]); err != nil || m != n {
			t.Fatalf("write: %d %v", m, err)
		}
		i += n
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*"))
	if len(left) != 0 {
		t.Fatalf("chunk files left: %v", left)
	}
	return got, f
}

// split cuts a bounded file at its marker: head, marker line, tail.
func split(t testing.TB, got []byte, lines bool) (head, marker, tail []byte) {
	t.Helper()
	prefix := []byte(TextMarkerPrefix)
	if lines {
		prefix = []byte(`{"troupe_truncated"`)
	}
	i := bytes.Index(got, prefix)
	if i < 0 {
		return got, nil, nil
	}
	j := bytes.IndexByte(got[i:], '\n')
	return got[:i], got[i : i+j+1], got[i+j+1:]
}

func TestText(t *testing.T) {
	lim := Limit{Head: 100, Tail: 50}
	for _, total := range []int{0, 10, 100, 150, 151, 1000, 100_000} {
		data := make([]byte, total)
		for i := range data {
			data[i] = byte('a' + i%26)
		}
		for _, pieces := range [][]int{nil, {1}, {7, 13}, {64}} {
			got, f := write(t, lim, data, pieces...)
			if total <= 150 {
				if !bytes.Equal(got, data) {
					t.Fatalf("%d bytes in %v: not kept whole: %q", total, pieces, got)
				}
				continue
			}
			head, marker, tail := split(t, got, false)
			want := fmt.Sprintf("%d bytes (0 lines) dropped here", total-150)
			if !bytes.Equal(head, append(data[:100:100], '\n')) || !bytes.Equal(tail, data[total-50:]) || !strings.Contains(string(marker), want) {
				t.Fatalf("%d bytes in %v: head %d, tail %d, marker %q", total, pieces, len(head), len(tail), marker)
			}
			if f.Dropped() != int64(total-150) {
				t.Errorf("Dropped() = %d", f.Dropped())
			}
		}
	}
}

// TestLines: a bounded JSON-lines file holds whole lines and one marker
// line that accounts for every byte.
func TestLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var data []byte
		for i := range rng.IntN(300) {
			line, _ := json.Marshal(map[string]any{"i": i, "pad": strings.Repeat("x", rng.IntN(40))})
			data = append(append(data, line...), '\n')
		}
		lim := Limit{Head: int64(rng.IntN(400)), Tail: int64(rng.IntN(400)), Lines: true}
		got, f := write(t, lim, data, rng.IntN(60)+1, rng.IntN(200)+1)
		head, marker, tail := split(t, got, true)
		if marker == nil {
			if !bytes.Equal(got, data) {
				t.Fatalf("round %d: no marker, but the file changed", round)
			}
			continue
		}
		var m Marker
		if err := json.Unmarshal(marker, &m); err != nil {
			t.Fatalf("round %d: marker %q: %v", round, marker, err)
		}
		kept := int64(len(head) + len(tail))
		if kept+m.Truncated.DroppedBytes != int64(len(data)) || f.Dropped() != m.Truncated.DroppedBytes {
			t.Fatalf("round %d: kept %d + dropped %d != %d", round, kept, m.Truncated.DroppedBytes, len(data))
		}
		if int64(len(head)) > lim.Head || int64(len(tail)) > lim.Tail {
			t.Fatalf("round %d: head %d tail %d over %+v", round, len(head), len(tail), lim)
		}
		if !bytes.HasPrefix(data, head) || !bytes.HasSuffix(data, tail) {
			t.Fatalf("round %d: head or tail is not the data's", round)
		}
		for _, part := range [][]byte{head, tail} {
			for line := range bytes.Lines(part) {
				if !json.Valid(line) {
					t.Fatalf("round %d: a cut line %q", round, line)
				}
			}
		}
		if got := m.Truncated.DroppedLines; got != int64(bytes.Count(data, []byte{'\n'})-bytes.Count(head, []byte{'\n'})-bytes.Count(tail, []byte{'\n'})) {
			t.Fatalf("round %d: dropped_lines %d", round, got)
		}
	}
}

func TestUnbounded(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 10_000)
	if got, f := write(t, Limit{}, data, 333); !bytes.Equal(got, data) || f.Dropped() != 0 {
		t.Error("an unbounded file changed")
	}
}

func TestWriteAfterClose(t *testing.T) {
	f, err := Create(filepath.Join(t.TempDir(), "x"), Limit{Head: 1, Tail: 1})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := f.Write([]byte("late")); err == nil {
		t.Error("a write after Close succeeded")
	}
	if err := f.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// BenchmarkOverflow writes 64 MiB, 32 KiB at a time, into a file bounded to
// 8 MiB (troupe) and into a plain file (baseline): what an agent that floods
// its output costs troupe.
func BenchmarkOverflow(b *testing.B) {
	buf := bytes.Repeat([]byte("0123456789abcdef"), 2048) // 32 KiB
	for _, v := range []struct {
		name string
		open func(string) (io.WriteCloser, error)
	}{
		{"baseline", func(p string) (io.WriteCloser, error) { return os.Create(p) }},
		{"troupe", func(p string) (io.WriteCloser, error) { return Create(p, Limit{Head: 4 << 20, Tail: 4 << 20}) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(64 << 20)
			for b.Loop() {
				f, err := v.open(filepath.Join(b.TempDir(), "out.log"))
				if err != nil {
					b.Fatal(err)
				}
				for range 2048 {
					f.Write(buf)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
