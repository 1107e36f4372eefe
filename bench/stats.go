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
	fmt.Printf("%-52s %10s %10s %10s %6d\n", name, ms(s.pct(0.5)), ms(s.pct(0.95)), ms(s.pct(0.99)), len(s))
}
