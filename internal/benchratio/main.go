// Command benchratio reads `go test -bench` output and prints, for every
// benchmark that has a "baseline" sub-benchmark, each variant's median time
// as a ratio to the baseline's median from the same run. Absolute times on
// shared machines drift; ratios measured side by side do not drift as much.
//
//	go test -run '^$' -bench . -count 5 ./... | go run ./internal/benchratio
package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A result line: name-GOMAXPROCS, iterations, then value/unit pairs.
var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

type samples map[string][]float64 // unit -> values

func main() {
	if err := report(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
}

func report(in io.Reader, out io.Writer) error {
	results := map[string]samples{}
	var order []string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := m[1]
		if results[name] == nil {
			results[name] = samples{}
			order = append(order, name)
		}
		fields := strings.Fields(m[2])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err == nil {
				results[name][fields[i+1]] = append(results[name][fields[i+1]], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Fprintln(out, "| benchmark | variant | metric | median | baseline median | × baseline | runs |")
	fmt.Fprintln(out, "|---|---|---|---:|---:|---:|---:|")
	printed := 0
	for _, name := range order {
		parent, variant, ok := cut(name)
		if !ok || variant == "baseline" {
			continue
		}
		base, ok := results[parent+"/baseline"]
		if !ok {
			continue
		}
		r := results[name]
		for _, unit := range slices.Sorted(maps.Keys(r)) {
			b, ok := base[unit]
			if !ok || unit == "MB/s" {
				continue
			}
			ratio := "–"
			if m := median(b); m != 0 {
				ratio = fmt.Sprintf("%.2f", median(r[unit])/m)
			}
			fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %d |\n", parent, variant, unit, format(median(r[unit])), format(median(b)), ratio, len(r[unit]))
			printed++
		}
	}
	if printed == 0 {
		return fmt.Errorf("no benchmark with a baseline sub-benchmark in the input")
	}
	return nil
}

// format prints a figure with sensible precision.
func format(v float64) string {
	if v >= 100 || v == float64(int64(v)) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// cut splits "BenchmarkX/variant" at its last slash.
func cut(name string) (parent, variant string, ok bool) {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
