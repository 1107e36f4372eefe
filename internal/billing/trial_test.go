package billing

import (
	"testing"
	"time"
)

func TestTrialMs(t *testing.T) {
	hourMs, hourNs := time.Hour.Milliseconds(), time.Hour.Nanoseconds()
	tests := []struct {
		name      string
		memoryMiB int64
		busyCPUs  float64
		want      int64
	}{
		{"2 vCPU 4 GiB idle: one trial hour", 4096, 0, hourMs},
		{"2 vCPU 4 GiB both CPUs busy: still one", 4096, 2, hourMs},
		{"1 GiB idle: a quarter", 1024, 0, hourMs / 4},
		{"512 MiB with two CPUs busy: one", 512, 2, hourMs},
		{"16 GiB idle: four", 16384, 0, 4 * hourMs},
		{"16 GiB with 6 CPUs busy: four (memory counts more)", 16384, 6, 4 * hourMs},
		{"1 GiB with 6 CPUs busy: three (CPU counts more)", 1024, 6, 3 * hourMs},
		{"nothing", 0, 0, 0},
	}
	for _, tt := range tests {
		got := TrialMs(tt.memoryMiB*hourMs, int64(tt.busyCPUs*float64(hourNs)))
		if got != tt.want {
			t.Errorf("%s: got %d ms, want %d", tt.name, got, tt.want)
		}
	}
	// Rounded up: a sliver of use is never free.
	if got := TrialMs(1, 1); got != 1 {
		t.Errorf("a sliver: got %d ms, want 1", got)
	}
}
