package main

import (
	"fmt"
	"time"
)

// poolWatch follows the pool of the bench's pool server through its log
// ("pool member ready"): the API says nothing of a pool's state.
type poolWatch struct {
	tap     *logTap
	size    int
	refill  time.Duration // longest wait for a refill; the fixed wait without log
	claimed series        // claim -> the pool full again, one claim at a time
	burst   series        // burst start -> the pool full again
	logged  bool          // the server logs ready members
}

// warm waits until the pool's members are all ready, at most settle; it
// reports how many were and when.
func (p *poolWatch) warm(start time.Time, settle time.Duration) string {
	at, ok := p.tap.waitReady(start, p.size, settle)
	n := p.tap.total()
	p.logged = n > 0
	switch {
	case ok:
		return fmt.Sprintf("pool warm: %d/%d members ready %.1f s after the server started", n, p.size, at.Sub(start).Seconds())
	case n > 0:
		return fmt.Sprintf("pool not full: %d/%d members ready after the settle wait of %v", n, p.size, settle)
	}
	return fmt.Sprintf("pool: no %q in the server log after the settle wait of %v", poolReady, settle)
}

// afterClaim waits for the member that replaces the one a create took at
// claim; without the log line it sleeps the fixed wait.
func (p *poolWatch) afterClaim(claim time.Time) {
	if !p.logged {
		time.Sleep(p.refill)
		return
	}
	if at, ok := p.tap.waitReady(claim, 1, p.refill); ok {
		p.claimed = append(p.claimed, at.Sub(claim))
	}
}

// afterBurst waits until the members a burst of n took are replaced.
func (p *poolWatch) afterBurst(start time.Time, n int) {
	if !p.logged {
		time.Sleep(p.refill)
		return
	}
	if at, ok := p.tap.waitReady(start, min(n, p.size), p.refill); ok {
		p.burst = append(p.burst, at.Sub(start))
	}
	p.quiet()
}

// quiet waits until no member has become ready for a second: the refill
// of creates beyond the pool's size, which the count cannot tell from
// cold ones, is over.
func (p *poolWatch) quiet() {
	for deadline := time.Now().Add(p.refill); time.Now().Before(deadline); {
		n, _ := p.tap.readySince(time.Now().Add(-time.Second))
		if n == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// report prints the refill figures, or n/a without the log line.
func (p *poolWatch) report() {
	if !p.logged {
		fmt.Printf("%-58s %10s\n", "pool refill (server logs no "+poolReady+")", "n/a")
		return
	}
	p.tap.boots().print("pool member boot (boot_ms in the server log)")
	p.claimed.print("pool refill: claim -> replacement member ready")
	p.burst.print("pool refill: burst start -> pool full again")
}
