//go:build linux

package inside

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestServiceSweepRefusesOnTheHost: outside a container (kthreadd is PID 2
// of the first PID namespace), kill(-1, SIGSTOP) would stop every process
// the user may signal.
func TestServiceSweepRefusesOnTheHost(t *testing.T) {
	if p, _, ok := readProc(2); !ok || p.Cmd != "[kthreadd]" {
		t.Skip("not in the first PID namespace")
	}
	if _, err := ListService(); !errors.Is(err, ErrNotInService) {
		t.Errorf("ListService on the host: %v", err)
	}
	base := Baseline{Procs: []ProcKey{{PID: 1}}}
	if _, err := SweepService(t.Context(), base, time.Millisecond); !errors.Is(err, ErrNotInService) {
		t.Errorf("SweepService on the host: %v", err)
	}
}

func TestStatStart(t *testing.T) {
	fields := " S 1 12 12 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200"
	for _, tc := range []struct {
		stat string
		want uint64
		ok   bool
	}{
		{"12 (sleep)" + fields, 987654, true},
		{"13 (a) b)" + fields, 987654, true},
		{"14 (with ) 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 paren)" + fields, 987654, true},
		{"15 (short) S 1 2 3", 0, false},
		{"16 (broken S 1 12 12 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654", 0, false},
		{"17 (x) S 1 12 12 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 -5 1000", 0, false},
	} {
		got, ok := statStart([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.stat, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzStatStart: any /proc stat line, even one whose command holds
// parentheses and numbers, is read without a panic, and a start time is
// only ever read after the last ')'.
func FuzzStatStart(f *testing.F) {
	f.Add([]byte("12 (sleep) S 1 12 12 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200"))
	f.Add([]byte("13 (a) 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21) S"))
	f.Fuzz(func(t *testing.T, stat []byte) {
		_, ok := statStart(stat)
		if ok && len(strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))) < 20 {
			t.Errorf("%q: a start time read from fewer than 20 fields after the command", stat)
		}
	})
}
