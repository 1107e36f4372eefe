package manager

import (
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestStatsSeries: the CPU percentage is against the previous sample, of
// all CPUs, bounded; a full series thins its older half and keeps its
// newest samples; a window selects; drop forgets.
func TestStatsSeries(t *testing.T) {
	var s statsStore
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s.add("a", sandbox.Metric{Timestamp: t0, CPUCount: 2}, 10)
	s.add("a", sandbox.Metric{Timestamp: t0.Add(5 * time.Second), CPUCount: 2}, 15) // 5 s of CPU in 5 s of 2 CPUs
	s.add("a", sandbox.Metric{Timestamp: t0.Add(10 * time.Second), CPUCount: 2}, 1000)
	s.add("a", sandbox.Metric{Timestamp: t0.Add(15 * time.Second), CPUCount: 2}, 3) // the counter restarted
	got := s.get("a", time.Time{}, time.Time{})
	want := []float64{0, 50, 100, 0}
	for i, m := range got {
		if m.CPUUsedPct != want[i] {
			t.Errorf("sample %d: %v%%, want %v", i, m.CPUUsedPct, want[i])
		}
	}
	if w := s.get("a", t0.Add(5*time.Second), t0.Add(10*time.Second)); len(w) != 2 {
		t.Errorf("window: %d samples, want 2", len(w))
	}
	for i := range 2 * maxSamples {
		s.add("b", sandbox.Metric{Timestamp: t0.Add(time.Duration(i) * time.Second), CPUCount: 1}, 0)
	}
	b := s.get("b", time.Time{}, time.Time{})
	if len(b) > maxSamples || !b[0].Timestamp.Equal(t0) || !b[len(b)-1].Timestamp.Equal(t0.Add(time.Duration(2*maxSamples-1)*time.Second)) {
		t.Errorf("a long life: %d samples from %v to %v, want at most %d from the first to the last", len(b), b[0].Timestamp, b[len(b)-1].Timestamp, maxSamples)
	}
	for i := 1; i < len(b); i++ {
		if !b[i].Timestamp.After(b[i-1].Timestamp) {
			t.Fatalf("sample %d is not after the one before", i)
		}
	}
	s.drop("a")
	if len(s.get("a", time.Time{}, time.Time{})) != 0 {
		t.Error("dropped series still answers")
	}
}
