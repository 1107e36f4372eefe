package cli

import (
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// The network rates come from the last two samples, and a counter that
// went back (a resumed sandbox) shows no rate rather than a huge one.
func TestTopRates(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	v := &topView{}
	if rx, tx := v.rates(); rx != "-" || tx != "-" {
		t.Errorf("no samples: %s %s, want - -", rx, tx)
	}
	v.prev = &api.SandboxMetric{Timestamp: t0, NetRx: 1000, NetTx: 5 << 20}
	v.last = &api.SandboxMetric{Timestamp: t0.Add(5 * time.Second), NetRx: 1000 + 5*2048, NetTx: 1 << 20}
	if rx, tx := v.rates(); rx != "2.0KiB" || tx != "-" {
		t.Errorf("rates %s %s, want 2.0KiB and - (the send counter went back)", rx, tx)
	}
}

func TestTopBar(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{0, "[----------]"}, {0.5, "[#####-----]"}, {0.97, "[##########]"}, {1.7, "[##########]"}, {-1, "[----------]"},
	} {
		if got := bar(c.f, 10); got != c.want {
			t.Errorf("bar(%v): %s, want %s", c.f, got, c.want)
		}
	}
	if ratio(5, 0) != 0 || ratio(1, 4) != 0.25 {
		t.Error("ratio")
	}
}
