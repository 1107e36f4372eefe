package accounts

import (
	"strconv"
	"testing"
	"time"
)

func TestTrialLimiter(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l := newTrialLimiter(2, 100, time.Hour)
	steps := []struct {
		addr     string
		at       time.Duration
		wantOK   bool
		wantWait time.Duration
	}{
		{"a", 0, true, 0},
		{"a", time.Minute, true, 0},
		{"a", 2 * time.Minute, false, 58 * time.Minute},
		{"b", 2 * time.Minute, true, 0},
		{"a", 59 * time.Minute, false, time.Minute},
		{"a", 60 * time.Minute, true, 0}, // a new window
		{"b", 61 * time.Minute, true, 0}, // b's window began at 2m
		{"b", 61*time.Minute + 30*time.Second, false, 30 * time.Second},
		{"b", 62 * time.Minute, true, 0},
	}
	for i, s := range steps {
		wait, err := l.allow(s.addr, t0.Add(s.at))
		if ok := err == nil; ok != s.wantOK || wait != s.wantWait {
			t.Errorf("step %d (%s at %v): got %v, wait %v, want %v, wait %v", i, s.addr, s.at, ok, wait, s.wantOK, s.wantWait)
		}
	}

	// Addresses whose window passed are dropped.
	l = newTrialLimiter(1, 1000, time.Hour)
	for i := range 100 {
		l.allow(strconv.Itoa(i), t0)
	}
	l.allow("late", t0.Add(time.Hour))
	if got := len(l.seen); got != 1 {
		t.Errorf("addresses kept after their windows passed: got %d, want 1", got)
	}

	// The limiter stays bounded: a full table refuses new addresses until
	// windows pass.
	l = newTrialLimiter(1, maxTrialAddresses+1, time.Hour)
	for i := range maxTrialAddresses {
		if _, err := l.allow(strconv.Itoa(i), t0); err != nil {
			t.Fatalf("address %d refused below the bound", i)
		}
	}
	if _, err := l.allow("one more", t0.Add(time.Minute)); err == nil {
		t.Error("a new address was counted past the bound")
	}
	if _, err := l.allow("one more", t0.Add(time.Hour)); err != nil {
		t.Error("a new address was refused once the windows passed")
	}
	if got := len(l.seen); got != 1 {
		t.Errorf("addresses kept: got %d, want 1", got)
	}
}

func TestClientAddr(t *testing.T) {
	tests := []struct {
		remote, want string
	}{
		{"192.0.2.7:5555", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:5555", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:5555", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:1", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:1", "fe80::/64"},
		{"@", "@"},
	}
	for _, tt := range tests {
		if got := ClientAddr(tt.remote); got != tt.want {
			t.Errorf("ClientAddr(%q): got %q, want %q", tt.remote, got, tt.want)
		}
	}
}
