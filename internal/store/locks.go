package store

import "sync"

// locks are the TryLock locks of a store that only one process opens
// (Bolt): held in this process, per store.
type locks struct {
	mu   sync.Mutex
	held map[string]bool
}

// try takes name if it is free.
func (l *locks) try(name string) (unlock func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[name] {
		return nil, false
	}
	if l.held == nil {
		l.held = map[string]bool{}
	}
	l.held[name] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.held, name)
		})
	}, true
}
