package inside

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkPackAs: copying an artifact folder out with the agents' rights
// (PackAs, a permission check per entry) against packing it as root with
// no check (Pack, the baseline): 500 files of 4 KiB in 10 folders.
func BenchmarkPackAs(b *testing.B) {
	dir := b.TempDir()
	data := make([]byte, 4096)
	for i := range 10 {
		sub := filepath.Join(dir, "art", fmt.Sprint("d", i))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 50 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprint("f", j)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	src := filepath.Join(dir, "art")
	b.Run("baseline", func(b *testing.B) {
		for b.Loop() {
			if err := Pack(io.Discard, src); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pack-as", func(b *testing.B) {
		creds := []Cred{{UID: 10001, GIDs: []int{10000}}, {UID: 10002, GIDs: []int{10000}}}
		for b.Loop() {
			if err := PackAs(io.Discard, src, creds); err != nil {
				b.Fatal(err)
			}
		}
	})
}
