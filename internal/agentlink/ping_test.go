package agentlink

import (
	"testing"
	"time"
)

// TestPingBucket pins the guest's ping allowance: a burst of pingBurst,
// then pingRate a second, never more than pingBurst saved up, and none
// while maxPingsOut are unanswered (which takes no token).
func TestPingBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	g := newFrameGuard(nil)
	g.now = func() time.Time { return now }
	take := func() bool {
		ok := g.allowPing()
		if ok {
			g.pingsOut-- // answered at once
		}
		return ok
	}
	for i := range pingBurst {
		if !take() {
			t.Fatalf("ping %d of the burst refused", i+1)
		}
	}
	if take() {
		t.Fatal("a ping past the burst passed")
	}
	now = now.Add(time.Second / pingRate)
	if !take() || take() {
		t.Fatal("want exactly one ping after 1/pingRate s")
	}
	now = now.Add(time.Hour)
	for i := range pingBurst {
		if !take() {
			t.Fatalf("after a long quiet: ping %d refused", i+1)
		}
	}
	if take() {
		t.Fatal("after a long quiet: more than the burst saved up")
	}

	// Unanswered pings hold the gate shut without spending tokens.
	now = now.Add(time.Hour)
	for range maxPingsOut {
		if !g.allowPing() {
			t.Fatal("an unanswered ping within maxPingsOut refused")
		}
	}
	for range 3 {
		if g.allowPing() {
			t.Fatal("a ping past maxPingsOut unanswered passed")
		}
	}
	g.pingsOut = 0
	for i := range pingBurst - maxPingsOut {
		if !take() {
			t.Fatalf("ping %d refused: the refused ones spent tokens", i+1)
		}
	}
	if take() {
		t.Fatal("more than the burst")
	}
}
