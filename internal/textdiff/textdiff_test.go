package textdiff

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestUnified(t *testing.T) {
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{"equal", "x\ny\n", "x\ny\n", ""},
		{"one line changed", "a\nb\nc\nd\ne\n", "a\nb\nC\nd\ne\n",
			"--- old\n+++ new\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n"},
		{"added at the end", "a\nb\n", "a\nb\nc\n", "--- old\n+++ new\n@@ -2,1 +2,2 @@\n b\n+c\n"},
		{"from nothing", "", "a\n", "--- old\n+++ new\n@@ -1,0 +1,1 @@\n+a\n"},
		{"two hunks far apart", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "x\n2\n3\n4\n5\n6\n7\n8\ny\n",
			"--- old\n+++ new\n@@ -1,2 +1,2 @@\n-1\n+x\n 2\n@@ -8,2 +8,2 @@\n 8\n-9\n+y\n"},
		{"close changes share a hunk", "1\n2\n3\n4\n", "x\n2\n3\ny\n",
			"--- old\n+++ new\n@@ -1,4 +1,4 @@\n-1\n+x\n 2\n 3\n-4\n+y\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unified("old", "new", tc.a, tc.b, 1, 0); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestUnifiedIsBounded(t *testing.T) {
	a := strings.Repeat("a\n", 100)
	b := strings.Repeat("b\n", 100)
	got := Unified("old", "new", a, b, 3, 10)
	if n := strings.Count(got, "\n"); n != 11 || !strings.HasSuffix(got, "… 193 more lines\n") {
		t.Errorf("%d lines:\n%s", n, got)
	}
}

// TestDiffIsAnEdit: on random texts, the removed and kept lines are the
// first text, the added and kept lines the second, and the edit is a
// shortest one: it keeps a longest common subsequence.
func TestDiffIsAnEdit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() []string {
		n := rng.IntN(12)
		var ls []string
		for range n {
			ls = append(ls, string(rune('a'+rng.IntN(4))))
		}
		return ls
	}
	for range 2000 {
		x, y := pick(), pick()
		var gotX, gotY []string
		kept := 0
		for _, o := range diff(x, y) {
			if o.kind != '+' {
				gotX = append(gotX, o.text)
			}
			if o.kind != '-' {
				gotY = append(gotY, o.text)
			}
			if o.kind == ' ' {
				kept++
			}
		}
		if strings.Join(gotX, ",") != strings.Join(x, ",") || strings.Join(gotY, ",") != strings.Join(y, ",") {
			t.Fatalf("%v → %v: the edit gives %v → %v", x, y, gotX, gotY)
		}
		if want := lcsLen(x, y); kept != want {
			t.Fatalf("%v → %v keeps %d lines, a longest common subsequence has %d", x, y, kept, want)
		}
	}
}

// lcsLen is the textbook recursion, memoised: a second implementation.
func lcsLen(x, y []string) int {
	memo := map[[2]int]int{}
	var f func(i, j int) int
	f = func(i, j int) int {
		if i == len(x) || j == len(y) {
			return 0
		}
		if v, ok := memo[[2]int{i, j}]; ok {
			return v
		}
		v := max(f(i+1, j), f(i, j+1))
		if x[i] == y[j] {
			v = 1 + f(i+1, j+1)
		}
		memo[[2]int{i, j}] = v
		return v
	}
	return f(0, 0)
}
