// Package backoff is the one retry backoff of the serving loops (the
// egress proxy's and resolver's, the agent link's on either end): a wait
// that starts at a floor and doubles up to a ceiling, as net/http's
// accept loop waits.
package backoff

import "time"

// Next returns the wait after the wait d: lo after none (d is 0), else
// twice d, at most hi. A success resets the caller's wait to 0.
func Next(d, lo, hi time.Duration) time.Duration {
	if d == 0 {
		return lo
	}
	return min(2*d, hi)
}
