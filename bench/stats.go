package main

import (
	"fmt"
	"sort"
	"time"
)

// series is a set of durations.
type series []time.Duration

func (s series) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := append(series(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	i := int(p*float64(len(c)-1) + 0.5)
	return c[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func (s series) print(name string) {
	fmt.Printf("%-58s %10s %10s %10s %6d\n", name, ms(s.pct(0.5)), ms(s.pct(0.95)), ms(s.pct(0.99)), len(s))
}

// header is the table's first line; rows print under it.
func header() {
	fmt.Printf("%-58s %10s %10s %10s %6s %6s %6s\n", "figure", "median", "p95", "p99", "n", "errors", "hits")
}

// print writes the row, then each distinct error it met.
func (r row) print(group string) {
	name := group + ": " + r.name
	if len(r.s) == 0 {
		fmt.Printf("%-58s %10s %10s %10s %6d %6d %6d\n", name, "-", "-", "-", 0, len(r.errs), r.hits)
	} else {
		fmt.Printf("%-58s %10s %10s %10s %6d %6d %6d\n", name, ms(r.s.pct(0.5)), ms(r.s.pct(0.95)), ms(r.s.pct(0.99)), len(r.s), len(r.errs), r.hits)
	}
	seen := map[string]int{}
	for _, e := range r.errs {
		seen[e]++
	}
	for e, n := range seen {
		fmt.Printf("    error x%d: %s\n", n, e)
	}
}
