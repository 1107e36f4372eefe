package network

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkAttach times Attach alone (the namespace is made beforehand
// and the link removed afterwards, off the clock) and reports the median.
// Run with -benchtime=20x for the median of 20.
func BenchmarkAttach(b *testing.B) {
	r := newRig(b, testPool(b))
	dir := b.TempDir()
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		ns := filepath.Join(dir, fmt.Sprint("ns", i))
		if err := NewNamespace(ns); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		l, err := r.p.Attach(fmt.Sprint("bench", i), ns)
		took = append(took, time.Since(start))
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		r.p.Detach(l)
		RemoveNamespace(ns)
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-ms")
}
