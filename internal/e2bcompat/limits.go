package e2bcompat

import (
	"context"
	"sync"
)

// keyLimiter lets at most per calls of one account run at once; the rest
// wait their turn (or for their context).
type keyLimiter struct {
	per int
	mu  sync.Mutex
	m   map[string]*slots
}

// slots are one account's turns, and how many calls hold or wait for one.
type slots struct {
	ch    chan struct{}
	users int
}

func newKeyLimiter(per int) *keyLimiter {
	return &keyLimiter{per: per, m: map[string]*slots{}}
}

// acquire waits for a turn of acct; release gives it back.
func (l *keyLimiter) acquire(ctx context.Context, acct string) (release func(), err error) {
	l.mu.Lock()
	s := l.m[acct]
	if s == nil {
		s = &slots{ch: make(chan struct{}, l.per)}
		l.m[acct] = s
	}
	s.users++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if s.users--; s.users == 0 {
			delete(l.m, acct)
		}
	}
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
