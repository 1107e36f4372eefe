package egress

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// dnsLimiter bounds each sandbox's DNS queries: a rate (a token bucket
// holding a second's worth) and how many are being answered at once, so
// that one sandbox's flood neither starves the resolver's workers nor
// queues lookups on the host's resolver for everyone.
type dnsLimiter struct {
	rate     int // queries per second, and the bucket's size
	inflight int

	mu  sync.Mutex // guards by
	by  map[string]*dnsBucket
	now func() time.Time
}

type dnsBucket struct {
	queries  *rate.Limiter
	inflight int
}

func newDNSLimiter(rate, inflight int) *dnsLimiter {
	return &dnsLimiter{rate: rate, inflight: inflight, by: map[string]*dnsBucket{}, now: time.Now}
}

// begin admits one query of sandbox id: it returns the function that ends
// it, or why it is refused.
func (l *dnsLimiter) begin(id string) (end func(), reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.by[id]
	if b == nil {
		b = &dnsBucket{queries: rate.NewLimiter(rate.Limit(l.rate), l.rate)}
		l.by[id] = b
	}
	// The concurrency bound is checked first: a query it refuses takes no
	// token.
	switch {
	case b.inflight >= l.inflight:
		return nil, "DNS concurrency limit"
	case !b.queries.AllowN(now, 1):
		return nil, "DNS rate limit"
	}
	b.inflight++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		b.inflight--
	}, ""
}

// forget drops sandbox id's bucket (a query still in flight ends on the
// old one, harmlessly).
func (l *dnsLimiter) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.by, id)
}
