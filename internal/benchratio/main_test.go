package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	in := `goos: linux
BenchmarkX/baseline-2   	     100	      1000 ns/op	  10 B/op	       1 allocs/op
BenchmarkX/baseline-2   	     100	      3000 ns/op	  10 B/op	       1 allocs/op
BenchmarkX/baseline-2   	     100	      2000 ns/op	  10 B/op	       1 allocs/op
BenchmarkX/troupe-2     	     100	      5000 ns/op	  20 B/op	       2 allocs/op
BenchmarkX/troupe-2     	     100	      4000 ns/op	  20 B/op	       2 allocs/op
BenchmarkX/troupe-2     	     100	      6000 ns/op	  20 B/op	       2 allocs/op
BenchmarkLonely-2       	     100	      6000 ns/op
PASS
`
	var out bytes.Buffer
	if err := report(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| BenchmarkX | troupe | ns/op | 5000 | 2000 | 2.50 | 3 |",
		"| BenchmarkX | troupe | allocs/op | 2 | 1 | 2.00 | 3 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "Lonely") {
		t.Error("a benchmark without a baseline was reported")
	}
	if err := report(strings.NewReader("PASS\n"), &out); err == nil {
		t.Error("no error for input without baselines")
	}
}
