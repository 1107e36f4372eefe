package billing

import (
	"testing"
	"time"
)

func TestHeadlineRates(t *testing.T) {
	hour := time.Hour
	tests := []struct {
		name      string
		vcpus     int
		memoryMiB int
		busyCPUs  float64
		wantNanos int64
	}{
		{"2 vCPU 4 GiB idle", 2, 4096, 0, 31_250_000},
		{"2 vCPU 4 GiB both CPUs busy", 2, 4096, 2, 80_000_000},
		{"1 vCPU 1 GiB idle scales with size", 1, 1024, 0, 7_812_500},
		{"8 vCPU 16 GiB busy", 8, 16384, 8, 4*31_250_000 + 8*24_375_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Default.Running(int64(tt.memoryMiB)*hour.Milliseconds(), int64(tt.busyCPUs*float64(hour.Nanoseconds())))
			if got != tt.wantNanos {
				t.Fatalf("got %d nanos an hour, want %d", got, tt.wantNanos)
			}
		})
	}
}

func TestMaxLease(t *testing.T) {
	if got := Default.MaxLease(2, 4096, 30*time.Minute); got != 40_000_000 {
		t.Fatalf("half an hour at full CPU: got %d nanos, want 40000000", got)
	}
	// A day of the largest size does not overflow.
	if got := Default.MaxLease(8, 16384, 24*time.Hour); got != 24*(4*31_250_000+8*24_375_000) {
		t.Fatalf("a day of 8 vCPU 16 GiB: got %d", got)
	}
}

func TestPausedAndMicros(t *testing.T) {
	if got := Default.Paused(4096, time.Hour.Milliseconds()); got != 0 {
		t.Fatalf("default storage price: got %d, want 0", got)
	}
	p := Default
	p.StorageNanosPerGiBHour = 1000
	if got := p.Paused(2048, 2*time.Hour.Milliseconds()); got != 4000 {
		t.Fatalf("2 GiB for 2 hours at 1000: got %d, want 4000", got)
	}
	for nanos, want := range map[int64]int64{0: 0, 1: 1, 1000: 1, 1001: 2} {
		if got := Micros(nanos); got != want {
			t.Errorf("Micros(%d): got %d, want %d", nanos, got, want)
		}
	}
	if (Prices{CPUNanosPerCPUHour: -1}).Validate() == nil {
		t.Fatal("a negative price was accepted")
	}
}
